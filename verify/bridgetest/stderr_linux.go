package bridgetest

import (
	"fmt"
	"os"
	"syscall"
)

// logStderr appends this process's standard error to the file that
// SSMK_STDERR_LOG names, at the file descriptor, so that the Go runtime's
// own fatal errors land there too. A fuzz worker runs with its standard
// streams discarded by Go's fuzzing coordinator: a worker that ends
// ("exit status 2") says why only here.
func logStderr() {
	path := os.Getenv("SSMK_STDERR_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bridgetest: SSMK_STDERR_LOG=%s: %v\n", path, err)
		return
	}
	if err := syscall.Dup3(int(f.Fd()), 2, 0); err != nil {
		fmt.Fprintf(os.Stderr, "bridgetest: SSMK_STDERR_LOG=%s: %v\n", path, err)
		return
	}
	fmt.Fprintf(os.Stderr, "== pid %d: %v\n", os.Getpid(), os.Args)
}
