// Package crashy is a test process that dies inside a test, for
// TestRunResuming: TestB panics on a goroutine of its own (which no
// recover in the test can catch) unless CRASHY_SAFE is set.
package crashy

import (
	"os"
	"testing"
)

func TestA(t *testing.T) {}

func TestB(t *testing.T) {
	t.Run("sub", func(t *testing.T) {
		if os.Getenv("CRASHY_SAFE") == "" {
			var s []int
			_ = s[len(os.Args)] // index out of range
		}
	})
}

func TestC(t *testing.T) { t.Error("C fails on its own") }

func TestD(t *testing.T) {}
