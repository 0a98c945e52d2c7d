package judge

import (
	"math"
	"testing"

	"ssmverify/ssm"
)

// TestJudgeOrderDecides: JudgeOrder passes the errors each method's order
// predicts and fails a method of the wrong order, an exact method whose error
// does not shrink (a constant 1e-6 fits slope 0 as rounding does), and NaN.
func TestJudgeOrderDecides(t *testing.T) {
	var deltas []float64
	for k := 1; k <= 11; k++ {
		deltas = append(deltas, math.Ldexp(1, -k))
	}
	law := func(p, c float64) []float64 {
		var e []float64
		for _, d := range deltas {
			e = append(e, c*math.Pow(d, p))
		}
		return e
	}
	constant := func(v float64) []float64 { return law(0, v) }
	for _, tc := range []struct {
		name string
		m    ssm.Method
		errs []float64
		ok   bool
	}{
		{"zoh, order 1", ssm.ZOH, law(1, 0.3), true},
		{"rk4, order 4", ssm.RK4, law(4, 0.01), true},
		{"rk4 computing order 2", ssm.RK4, law(2, 0.1), false},
		{"bilinear, order 2", ssm.Bilinear, law(2, 0.05), true},
		{"foh at rounding", ssm.FOH, constant(3e-16), true},
		{"foh with a constant error", ssm.FOH, constant(1e-6), false},
		{"foh of order 1", ssm.FOH, law(1, 0.3), false},
		{"foh NaN", ssm.FOH, constant(math.NaN()), false},
		{"zoh NaN", ssm.ZOH, constant(math.NaN()), false},
	} {
		if err := JudgeOrder(tc.m, deltas, tc.errs); (err == nil) != tc.ok {
			t.Errorf("%s: JudgeOrder = %v, want ok %t", tc.name, err, tc.ok)
		}
	}
}

// TestFitSlope: the fit recovers a known power law and ignores the points
// at rounding level.
func TestFitSlope(t *testing.T) {
	var x, y []float64
	for k := 1; k <= 11; k++ {
		d := math.Ldexp(1, -k)
		x, y = append(x, d), append(y, 3*math.Pow(d, 4))
	}
	if s := FitSlope(x, y); math.Abs(s-4) > 1e-9 {
		t.Errorf("slope %g, want 4", s)
	}
	y[9], y[10] = 1e-16, 2e-16
	if s := FitSlope(x, y); math.Abs(s-4) > 1e-9 {
		t.Errorf("slope %g with rounding-level points, want 4 (they are left out)", s)
	}
	if s := FitSlope(x, []float64{1e-16, 1e-16, 1e-16, 1e-16, 1e-16, 1e-16, 1e-16, 1e-16, 1e-16, 1e-16, 1e-16}); s != 0 {
		t.Errorf("slope %g at rounding everywhere, want 0", s)
	}
}
