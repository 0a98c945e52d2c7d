package bridgetest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestKnownTag(t *testing.T) {
	known, err := ParseKnown("narrow:tf32, varlen:seq-states-no-init,raises~NoneType")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		msg, tag string
		ok       bool
	}{
		{"prefill b1: ratio 12; diagnosis [narrow:tf32] …", "narrow:tf32", true},
		{"ssd_bwd b1: ratio 9 at dx; diagnosis [fwd:narrow:tf32] …", "fwd:narrow:tf32", true},
		{"prefill: diagnosis [narrow:tf32+varlen:seq-states-no-init] …", "narrow:tf32+varlen:seq-states-no-init", true},
		// one cause that is not known makes the failure a finding
		{"prefill: diagnosis [narrow:tf32+op:in-chunk:zero] …", "", false},
		{"prefill: diagnosis [op:in-chunk:zero] …", "", false},
		// a TEXT entry asks for its text in the message
		{"step: diagnosis [raises] AttributeError: 'NoneType' object has no attribute 'stride'", "raises", true},
		{"step: diagnosis [raises] IndexError: out of range", "", false},
		// no tag: an isolation breach is never known
		{"isolation: sequence 1's y changed by NaN in sequence 0", "", false},
		// a tag that only ends like a known one's word is not it
		{"prefill: diagnosis [notnarrow:tf32x] …", "", false},
	}
	for _, c := range cases {
		tag, ok := KnownTag(known, c.msg)
		if ok != c.ok || tag != c.tag {
			t.Errorf("KnownTag(%q) = %q, %v; want %q, %v", c.msg, tag, ok, c.tag, c.ok)
		}
	}
	if _, ok := KnownTag(nil, "prefill: diagnosis [narrow:tf32]"); ok {
		t.Error("with no entries a failure was known")
	}
}

func TestParseKnownRefuses(t *testing.T) {
	for _, s := range []string{"crash", "missing~x", "a b", "~text", "x+y", "[x]"} {
		if _, err := ParseKnown(s); err == nil {
			t.Errorf("ParseKnown(%q): no error", s)
		}
	}
}

type recordingTB struct {
	testing.TB
	errs, skips []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Error(args ...any) { r.errs = append(r.errs, fmt.Sprint(args...)) }

func (r *recordingTB) Skip(args ...any) {
	r.skips = append(r.skips, fmt.Sprint(args...))
	runtime.Goexit()
}

func (r *recordingTB) Skipf(format string, args ...any) {
	r.skips = append(r.skips, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// within runs fuzzCheckWithin on r in a goroutine of its own (a skip
// ends it, as it ends a test) and waits for it.
func (r *recordingTB) within(deadline time.Duration, args []any, check func() string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fuzzCheckWithin(r, deadline, args, check)
	}()
	<-done
}

func TestFuzzCheckReportsAPanic(t *testing.T) {
	r := &recordingTB{TB: t}
	r.within(0, nil, func() string {
		var a []int
		return fmt.Sprint(a[3]) // the suite's own defect, as a fuzz input might find one
	})
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "index out of range") || !strings.Contains(r.errs[0], "fuzzknown_test.go") {
		t.Fatalf("FuzzCheck reported %q, want the panic and its stack", r.errs)
	}
	r.errs = nil
	r.within(0, nil, func() string { return "" })
	if len(r.errs) != 0 {
		t.Errorf("a passing check reported %q", r.errs)
	}
}

// TestFuzzCheckLateFinding: a check that outlives its deadline skips its
// input, keeps later inputs out while it runs, and writes its failure with
// the input as a corpus file when it ends.
func TestFuzzCheckLateFinding(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvFuzzLateDir, dir)
	release := make(chan struct{})
	r := &recordingTB{TB: t}
	msg := "prefill b=1: diagnosis [op:in-chunk:zero] the own term is missing"
	args := []any{[]byte("\x00O\x01"), byte(4), uint16(771)}
	r.within(time.Millisecond, args, func() string { <-release; return msg })
	if len(r.skips) != 1 || len(r.errs) != 0 {
		t.Fatalf("a check past its deadline: skips %q, errors %q; want one skip", r.skips, r.errs)
	}
	r.within(20*time.Millisecond, nil, func() string { t.Error("ran while the late check was running"); return "" })
	if len(r.skips) != 2 || !strings.Contains(r.skips[1], "still judging") {
		t.Fatalf("an input while a late check runs: skips %q", r.skips)
	}
	close(release)
	kernelBusy <- struct{}{} // the late check has ended
	<-kernelBusy
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 2 {
		t.Fatalf("late finding: files %v, want the input and its message", files)
	}
	var corpus, text string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.HasSuffix(f, ".txt") {
			text = string(b)
		} else {
			corpus = string(b)
		}
	}
	want := "go test fuzz v1\n[]byte(\"\\x00O\\x01\")\nbyte('\\x04')\nuint16(771)\n"
	if corpus != want || !strings.Contains(text, msg) {
		t.Errorf("late finding: corpus %q (want %q), message %q", corpus, want, text)
	}
}

func TestParseDeadline(t *testing.T) {
	if d, err := parseDeadline(""); err != nil || d != FuzzDeadline {
		t.Errorf("parseDeadline(\"\") = %v, %v", d, err)
	}
	if d, err := parseDeadline("2.5"); err != nil || d != 2500*time.Millisecond {
		t.Errorf("parseDeadline(2.5) = %v, %v", d, err)
	}
	for _, v := range []string{"10", "0", "-1", "x"} {
		if _, err := parseDeadline(v); err == nil || !strings.Contains(err.Error(), EnvFuzzDeadline) {
			t.Errorf("parseDeadline(%q): %v, want an error naming %s", v, err, EnvFuzzDeadline)
		}
	}
}
