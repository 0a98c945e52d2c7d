package ssm

import (
	"fmt"
	"math"
)

// Size is one size of a problem for CheckSizes.
type Size struct {
	Name string
	V    int
}

// CheckSizes requires every size to be at least 1, naming the first that
// is not after prefix ("mamba2: ", "mamba3: ").
func CheckSizes(prefix string, sizes ...Size) error {
	for _, s := range sizes {
		if s.V < 1 {
			return fmt.Errorf("%s%s = %d, want ≥ 1", prefix, s.Name, s.V)
		}
	}
	return nil
}

// Field is one array of a problem for CheckFields: its values, the length
// it must have, and whether it may be absent (nil).
type Field struct {
	Name     string
	V        []float64
	Want     int
	Optional bool
}

// CheckFields requires every present field to have its length and, with
// finite, finite values; the error names the field after prefix, and a
// length's ends with suffix (the problem's shape, say).
func CheckFields(prefix, suffix string, finite bool, fields ...Field) error {
	for _, f := range fields {
		if f.V == nil && f.Optional {
			continue
		}
		if len(f.V) != f.Want {
			return fmt.Errorf("%slen(%s) = %d, want %d%s", prefix, f.Name, len(f.V), f.Want, suffix)
		}
		if !finite {
			continue
		}
		for i, v := range f.V {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%s%s[%d] = %g, want a finite number", prefix, f.Name, i, v)
			}
		}
	}
	return nil
}
