package report

import (
	"encoding/json"
	"math"
	"testing"
)

// TestNumRoundTrip: the special values a broken kernel produces survive
// report.json both ways, and anything else is refused.
func TestNumRoundTrip(t *testing.T) {
	for _, v := range []float64{0, -1.5, 3e300, math.Inf(1), math.Inf(-1), math.NaN()} {
		b, err := json.Marshal(Num(v))
		if err != nil {
			t.Fatal(err)
		}
		var back Num
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%v → %s: %v", v, b, err)
		}
		if !(float64(back) == v || math.IsNaN(v) && math.IsNaN(float64(back))) {
			t.Errorf("%v → %s → %v", v, b, back)
		}
	}
	var n Num
	if err := json.Unmarshal([]byte(`"infinity"`), &n); err == nil {
		t.Error(`"infinity" decoded`)
	}
}
