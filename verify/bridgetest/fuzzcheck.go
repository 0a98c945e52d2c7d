package bridgetest

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Go's fuzzing gives one input 10 seconds in a worker process and then
// ends the worker (a panic, "deadlocked!", on a discarded standard error:
// the coordinator says only "fuzzing process hung or terminated
// unexpectedly" and keeps the input as a crasher). A kernel that compiles
// on first use — Triton's, for each new specialization, its autotuner's
// configurations besides — takes longer than that for the first input of
// a new shape, and longer still for a failing input's diagnosis, which
// runs the kernel on problems of its own; a campaign through upstream's
// kernels then ends within its first minute, on no finding of the kernel.
//
// FuzzCheck therefore runs an input's check in a goroutine and, in a fuzz
// worker, waits for it FuzzDeadline (8 s; SSMK_FUZZ_DEADLINE seconds): an
// input not judged by then is skipped, its check goes on in the
// background, and a failure it finds there (not a known one) is a late
// finding — its input written as a corpus file (replayable with go test
// -run=TARGET/ID once copied into testdata/fuzz/TARGET) and its message
// beside it, in the folder SSMK_FUZZ_LATE_DIR names (or on standard
// error). While a late check runs, an input waits for it up to half its
// deadline and is skipped past that (the kernel's worker is busy; the
// compilation it finishes makes the next input of that shape quick).
// Outside a fuzz worker (the corpus replayed by go test) a check runs to
// its end.
const (
	EnvFuzzDeadline = "SSMK_FUZZ_DEADLINE"
	EnvFuzzLateDir  = "SSMK_FUZZ_LATE_DIR"
	FuzzDeadline    = 8 * time.Second
)

// kernelBusy is held while a check runs, its own or, past its deadline,
// in the background: one check at a time reaches the kernel's worker.
var kernelBusy = make(chan struct{}, 1)

// inFuzzWorker reports whether this process is one of Go's fuzz workers.
func inFuzzWorker() bool {
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}

// fuzzDeadline is how long a fuzz worker waits for a check: 0 (to its
// end) outside a worker.
func fuzzDeadline() (time.Duration, error) {
	if !inFuzzWorker() {
		return 0, nil
	}
	return parseDeadline(os.Getenv(EnvFuzzDeadline))
}

// parseDeadline reads SSMK_FUZZ_DEADLINE ("" for FuzzDeadline).
func parseDeadline(v string) (time.Duration, error) {
	if v == "" {
		return FuzzDeadline, nil
	}
	sec, err := strconv.ParseFloat(v, 64)
	if err != nil || !(sec > 0 && sec < 10) {
		return 0, fmt.Errorf("%s = %q: want seconds above 0 and below 10 (Go's fuzzing ends a worker whose input takes 10 s)", EnvFuzzDeadline, v)
	}
	return time.Duration(sec * float64(time.Second)), nil
}

// FuzzCheck judges one fuzz input: check returns the failure's message
// ("" where the input passes), reported through FuzzFailure; a panic of
// the suite's own code is the input's failure with its stack (the suite
// must not panic on anything a kernel returns). check is given its own
// copy of data: it may run after the fuzz function has returned, and Go's
// fuzzing reuses an input's buffer for the next input.
func FuzzCheck(t testing.TB, data []byte, check func(data []byte) string) {
	t.Helper()
	data = bytes.Clone(data)
	fuzzCheck(t, []any{data}, func() string { return check(data) })
}

// FuzzPoisonCheck is FuzzCheck for the isolation targets' inputs: the
// problem's bytes, what to poison and where.
func FuzzPoisonCheck(t testing.TB, data []byte, what uint8, where uint16, check func(data []byte, what uint8, where uint16) string) {
	t.Helper()
	data = bytes.Clone(data)
	fuzzCheck(t, []any{data, what, where}, func() string { return check(data, what, where) })
}

// fuzzCheck judges one input with FuzzDeadline in a fuzz worker; args are
// the fuzz function's arguments after t, for a late finding's corpus file.
func fuzzCheck(t testing.TB, args []any, check func() string) {
	t.Helper()
	deadline, err := fuzzDeadline()
	if err != nil {
		t.Fatal(err)
	}
	fuzzCheckWithin(t, deadline, args, check)
}

func fuzzCheckWithin(t testing.TB, deadline time.Duration, args []any, check func() string) {
	t.Helper()
	run := func() (msg string) {
		defer func() {
			if r := recover(); r != nil {
				msg = fmt.Sprintf("ssmverify panicked (a defect of the suite, not of the kernel; please report it with this input): %v\n%s", r, debug.Stack())
			}
		}()
		return check()
	}
	if deadline == 0 {
		if msg := run(); msg != "" {
			FuzzFailure(t, msg)
		}
		return
	}
	start := time.Now()
	select {
	case kernelBusy <- struct{}{}:
	case <-time.After(deadline / 2):
		t.Skip("the kernel is still judging an earlier input that outlived its deadline")
	}
	done := make(chan string, 1)
	go func() { done <- run() }()
	select {
	case msg := <-done:
		<-kernelBusy
		if msg != "" {
			FuzzFailure(t, msg)
		}
	case <-time.After(deadline - time.Since(start)):
		go func() {
			defer func() { <-kernelBusy }()
			msg := <-done
			if known, _ := countKnown(msg); msg != "" && !known {
				writeLate(args, msg)
			}
		}()
		t.Skipf("not judged within %v (a first compilation?): judged in the background; a failure is written to %s", deadline, EnvFuzzLateDir)
	}
}

// corpusFile is args in the format of testdata/fuzz's files.
func corpusFile(args []any) string {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case byte:
			fmt.Fprintf(&b, "byte(%q)\n", v)
		case uint16:
			fmt.Fprintf(&b, "uint16(%d)\n", v)
		default:
			fmt.Fprintf(&b, "%T(%v)\n", v, v)
		}
	}
	return b.String()
}

// writeLate keeps a late finding: its input as a corpus file named as Go
// names them (the first 16 hex digits of its SHA-256) and its message in
// ID.txt, under SSMK_FUZZ_LATE_DIR; on standard error without it.
func writeLate(args []any, msg string) {
	file := corpusFile(args)
	id := fmt.Sprintf("%x", sha256.Sum256([]byte(file)))[:16]
	dir := os.Getenv(EnvFuzzLateDir)
	if dir == "" {
		fmt.Fprintf(os.Stderr, "late finding %s: %s\n%s", id, msg, file)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err == nil {
		if err = os.WriteFile(filepath.Join(dir, id), []byte(file), 0o644); err == nil {
			err = os.WriteFile(filepath.Join(dir, id+".txt"), []byte(msg+"\n"), 0o644)
		}
		if err == nil {
			return
		}
	}
	fmt.Fprintf(os.Stderr, "late finding %s (%s unwritable): %s\n%s", id, dir, msg, file)
}
