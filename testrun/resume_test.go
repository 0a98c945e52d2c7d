package testrun

import (
	"os"
	"strings"
	"testing"
)

// TestRunResuming: a process that dies inside TestB (testdata/crashy) is
// resumed without it and without the test that had ended, the crash is
// reported with its reason and place, and every other test's verdict
// stands, the failure of TestC among them.
func TestRunResuming(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test in subprocesses")
	}
	var resumed []Crash
	res, crashes, err := RunResuming(Spec{Root: "..", Package: "testrun/testdata/crashy", Env: os.Environ()}, nil, func(c Crash) ([]string, error) {
		resumed = append(resumed, c)
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(crashes) != 1 || len(resumed) != 1 || crashes[0].Test != "TestB" {
		t.Fatalf("crashes %+v, resumed %d times; want one, in TestB", crashes, len(resumed))
	}
	if why := crashes[0].Why; !strings.HasPrefix(why, "panic: runtime error: index out of range") || !strings.Contains(why, "crashy/crashy_test.go:17") {
		t.Errorf("the crash's reason %q does not say what and where", why)
	}
	got := map[string]string{}
	for _, tt := range res.Tests {
		if _, dup := got[tt.Name]; dup {
			t.Errorf("%s reported twice", tt.Name)
		}
		got[tt.Name] = tt.Result
	}
	want := map[string]string{"TestA": Pass, "TestB": Crashed, "TestC": Fail, "TestD": Pass}
	for name, r := range want {
		if got[name] != r {
			t.Errorf("%s: %q, want %q (all: %v)", name, got[name], r, got)
		}
	}
	// without the crash, one process and no resumption
	safe := Spec{Root: "..", Package: "testrun/testdata/crashy", Env: append(os.Environ(), "CRASHY_SAFE=1")}
	if _, crashes, err := RunResuming(safe, nil, func(Crash) ([]string, error) { t.Error("resumed without a crash"); return nil, nil }); err != nil || len(crashes) != 0 {
		t.Errorf("a run without a crash: crashes %v, err %v", crashes, err)
	}
}

// TestCrashOf reads a segmentation fault in a library as well as a panic,
// and no crash outside a test.
func TestCrashOf(t *testing.T) {
	segv := "=== RUN   TestScan\n=== RUN   TestScan/zoh\nSIGSEGV: segmentation violation\nPC=0x7f m=0 sigcode=1\n\ngoroutine 7 gp=0x1 m=0 [syscall]:\nssmverify/cudalib.(*Library).Scan(...)\n\t/src/ssmverify/cudalib/scan.go:120 +0x1\n"
	c, ok := CrashOf([]byte(segv))
	if !ok || c.Test != "TestScan" || !strings.HasPrefix(c.Why, "SIGSEGV: segmentation violation") || !strings.HasSuffix(c.Why, "at cudalib/scan.go:120") {
		t.Errorf("segmentation fault: %+v, %v", c, ok)
	}
	if _, ok := CrashOf([]byte("panic: in TestMain\n")); ok {
		t.Error("a panic before any test is not a crash inside one")
	}
}
