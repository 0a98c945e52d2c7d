package bridgetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogStderrKeepsAFatalError: a process whose standard error is
// discarded (as a fuzz worker's is) and that dies of a runtime panic
// leaves the panic in SSMK_STDERR_LOG's file.
func TestLogStderrKeepsAFatalError(t *testing.T) {
	if os.Getenv("SSMK_STDERR_HELPER") == "1" {
		logStderr()
		panic("a fatal error of the suite's own")
	}
	log := filepath.Join(t.TempDir(), "stderr.txt")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestLogStderrKeepsAFatalError$")
	cmd.Env = append(os.Environ(), "SSMK_STDERR_HELPER=1", "SSMK_STDERR_LOG="+log)
	cmd.Stdout, cmd.Stderr = nil, nil // discarded, as Go's fuzzing does
	if err := cmd.Run(); err == nil {
		t.Fatal("the helper did not fail")
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "a fatal error of the suite's own") {
		t.Errorf("SSMK_STDERR_LOG holds %q, want the panic", b)
	}
}
