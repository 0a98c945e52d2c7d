package ssm

import (
	"fmt"
	"strings"
)

// Method is a discretization method. The values are the ABI's method codes
// (SSMK_ZOH = 0 … SSMK_RK4 = 5), so a Method converts to the C argument as is.
type Method int32

// The six methods of ABI version 1, in ABI order.
const (
	ZOH       Method = 0
	FOH       Method = 1
	Bilinear  Method = 2
	Poly      Method = 3
	HighOrder Method = 4
	RK4       Method = 5
)

var methodNames = [...]string{"zoh", "foh", "bilinear", "poly", "highorder", "rk4"}

// Methods returns every method in ABI order.
func Methods() []Method {
	return []Method{ZOH, FOH, Bilinear, Poly, HighOrder, RK4}
}

// Valid reports whether m is one of the six ABI methods.
func (m Method) Valid() bool { return m >= ZOH && m <= RK4 }

// String returns the method's ABI name (lower case), or "method(N)" for an
// invalid value.
func (m Method) String() string {
	if !m.Valid() {
		return fmt.Sprintf("method(%d)", int32(m))
	}
	return methodNames[m]
}

// ParseMethod parses a method name, ignoring case and surrounding space.
// An unknown name is an error that lists the valid names.
func ParseMethod(name string) (Method, error) {
	s := strings.ToLower(strings.TrimSpace(name))
	for i, n := range methodNames {
		if s == n {
			return Method(i), nil
		}
	}
	return -1, fmt.Errorf("unknown discretization method %q: want one of %s",
		name, strings.Join(methodNames[:], ", "))
}

// ParseMethods parses a comma-separated list of method names; "all" or the
// empty string means every method.
func ParseMethods(list string) ([]Method, error) {
	s := strings.TrimSpace(list)
	if s == "" || strings.EqualFold(s, "all") {
		return Methods(), nil
	}
	var out []Method
	seen := map[Method]bool{}
	for _, part := range strings.Split(s, ",") {
		m, err := ParseMethod(part)
		if err != nil {
			return nil, err
		}
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out, nil
}

// Order is the method's order p: the local error Δ·|g(x) − φ1(x)| of B̄/B
// against the exact input integral shrinks as Δ^(p+1), and the global error
// of a scan of a constant input as Δ^p. zoh has order 1, highorder 2, poly 3,
// rk4 4; bilinear has order 2 (its error constant is x²/12, and its Ā is the
// (1,1) Padé approximant of e^x). foh uses φ1 itself, so its error is
// rounding only: Order reports 0 for "exact".
func (m Method) Order() int {
	switch m {
	case ZOH:
		return 1
	case HighOrder:
		return 2
	case Poly:
		return 3
	case RK4:
		return 4
	case Bilinear:
		return 2
	}
	return 0
}

// UsesExp reports whether the method's Ā is e^x (every method but bilinear).
func (m Method) UsesExp() bool { return m != Bilinear }
