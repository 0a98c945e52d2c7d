package verify

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/reference"
)

var (
	lib       *cudalib.Library
	rep       *Report
	reportDir = flag.String("report", "", "write report.json and summary.txt into this folder")
)

// TestMain opens the library under test once (cudalib.OpenDefault: the CPU
// build in CI, the CUDA build on a GPU machine, SSMK_LIB for a user's
// library), runs the suite, and writes the report.
func TestMain(m *testing.M) {
	flag.Parse()
	l, err := cudalib.OpenDefault()
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify: cannot open the library under test:", err)
		os.Exit(2)
	}
	lib, rep = l, NewReport(l)
	code := m.Run()
	rep.Finish()
	if *reportDir != "" {
		if err := rep.Write(*reportDir); err != nil {
			fmt.Fprintln(os.Stderr, "verify: writing the report:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// track records the test's verdict in the report when it ends.
func track(t *testing.T) {
	t.Cleanup(func() { rep.Verdict(t.Name(), !t.Failed()) })
}

// fallback reports whether the library declares that method m computes zoh
// for complex A in dtype dt (then complex results are held to the library's
// own zoh, in TestComplexFallback, not to the complex reference).
func fallback(m reference.Method, dt cudalib.DType) bool {
	return lib.Capabilities(m, dt, true).ComplexZOHFallback()
}

// scanChecked runs the kernel on p in dt (rounding p to float32 first for
// F32, so kernel and reference see the same numbers), compares with the
// reference and records the comparison under test. It returns the
// comparison and the (possibly rounded) problem.
func scanChecked(test string, p *reference.Problem, dt cudalib.DType) (Comparison, *reference.Problem, error) {
	if dt == cudalib.F32 {
		p = p.Clone()
		p.RoundToFloat32()
	}
	got, err := lib.Scan(p, dt)
	if err != nil {
		var e *cudalib.Error
		if errors.As(err, &e) && e.Status == cudalib.EUnsupported && !lib.Capabilities(p.Method, dt, p.Complex).Supported() {
			return Comparison{}, p, errUnsupported
		}
		return Comparison{}, p, err
	}
	c, err := CompareScan(p, got, dt, nil, nil)
	if err != nil {
		return c, p, err
	}
	rep.Add(test, p.Method, dt, p.Complex, c.Worst.Ratio, c.Worst.ULP, c.Passed(dt), c.Worst.String())
	return c, p, nil
}

var errUnsupported = errors.New("declared unsupported")
