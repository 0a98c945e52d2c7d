package mamba3

// A Slip is one of the known ways a kernel of the layer goes wrong, as the
// variant of the reference that computes it (package diagnose compares a
// failing kernel with each).
type Slip struct {
	Tag, Cause string
	Variant    Variant
	// Precision marks a slip of the arithmetic's precision (the angle in
	// bfloat16), a property a kernel may show beside another fault: the
	// diagnosis names it only where it explains the whole failure.
	Precision bool
}

// Slips returns the catalogue.
func Slips() []Slip {
	return []Slip{
		{"m3:no-previous", "the previous input's term is dropped (β = 0: exponential Euler with the current input)", Variant{NoPrevious: true}, false},
		{"m3:lambda-fixed", "λ is fixed at ½ instead of σ(Trap)", Variant{Lambda: func(float64) float64 { return 0.5 }}, false},
		{"m3:lambda-raw", "λ is Trap as given, without the sigmoid", Variant{Lambda: func(x float64) float64 { return x }}, false},
		{"m3:prev-key-current-angle", "the previous key is rotated by the current step's angle, not its own", Variant{PrevCurrentAngle: true}, false},
		{"m3:beta-no-dt", "β lacks its factor Δ: (1 − λ)·α", Variant{BetaNoDt: true}, false},
		{"m3:gamma-no-dt", "γ lacks its factor Δ: λ", Variant{GammaNoDt: true}, false},
		{"m3:rotate-halves", "the pairs (i, i + N/2) rotate instead of (2i, 2i + 1)", Variant{HalfSplit: true}, false},
		{"m3:angle-no-dt", "the angle accumulates tanh(Angles)·π without DT", Variant{AngleNoDt: true}, false},
		{"m3:angle-bf16", "the accumulated angle is kept in bfloat16", Variant{AngleBF16: true}, true},
		{"m3:angle-stored-bf16", "the accumulated angle is rounded to bfloat16 before the rotation and in the final state (summed in float32, stored in the Angles' bf16 type)", Variant{AngleStoredBF16: true}, true},
	}
}
