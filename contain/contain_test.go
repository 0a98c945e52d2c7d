package contain

import (
	"strings"
	"testing"
)

func index(s []int, i int) (v int, err error) {
	defer func() {
		if e := Recovered(recover(), "contain.index", func() string { return "a slice of 0" }); e != nil {
			err = e
		}
	}()
	return s[i], nil
}

// TestRecovered: a panic becomes an error naming the step, the input and
// the line; no panic, nil; an input that panics itself is left out.
func TestRecovered(t *testing.T) {
	_, err := index(nil, 0)
	if err == nil {
		t.Fatal("no error from a panic")
	}
	msg := err.Error()
	for _, want := range []string{"internal error of ssmverify in contain.index", "index out of range [0] with length 0", "contain/contain_test.go:", "(input: a slice of 0)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if e := Recovered(nil, "x", nil); e != nil {
		t.Errorf("no panic gave %v", e)
	}
	e := Recovered("boom", "x", func() string { panic("again") })
	if e == nil || e.Input != "" || e.Value != "boom" {
		t.Errorf("an input that panics: %+v", e)
	}
}
