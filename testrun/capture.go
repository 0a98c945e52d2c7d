package testrun

import (
	"bytes"
	"io"
	"os"
)

// CaptureStdout copies what a test binary prints to standard output (go
// test's verbose lines, each test's log) into a buffer as it passes
// through, so that a suite's TestMain can give every failure the first
// line of its message (Parse); the returned function stops the copy and
// returns what passed.
func CaptureStdout() func() []byte {
	orig := os.Stdout
	r, w, err := os.Pipe()
	if err != nil {
		return func() []byte { return nil }
	}
	os.Stdout = w
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.MultiWriter(orig, &buf), r)
		close(done)
	}()
	return func() []byte {
		w.Close()
		<-done
		os.Stdout = orig
		return buf.Bytes()
	}
}
