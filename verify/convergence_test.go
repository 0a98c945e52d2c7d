package verify

import (
	"fmt"
	"math"
	"testing"

	"ssmverify/ssm"
)

// TestConvergenceOrder: each method's global order, fitted from the
// library's fp64 scan of h' = −h + 1 (MeasureConvergence), within
// ConvergenceTolerance of ssm.Method.Order. The measurement goes into the
// report, where the gate plots it.
func TestConvergenceOrder(t *testing.T) {
	track(t)
	if !lib.Capabilities(ssm.ZOH, ssm.F64, false).Supported() {
		t.Skip("the library declares no fp64 scan")
	}
	c, err := MeasureConvergence(lib)
	if err != nil {
		t.Fatal(err)
	}
	rep.SetConvergence(c)
	for _, m := range ssm.Methods() {
		t.Run(m.String(), func(t *testing.T) {
			want, got := float64(m.Order()), c.Slopes[m.String()]
			if math.Abs(got-want) > ConvergenceTolerance {
				t.Errorf("%v: global order %.2f, want %s ± %g (errors %v at Δ = %v)", m, got, orderText(m), ConvergenceTolerance, c.Errors[m.String()], c.Deltas)
			}
		})
	}
}

func orderText(m ssm.Method) string {
	if m.Order() == 0 {
		return "0 (exact)"
	}
	return fmt.Sprint(m.Order())
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
