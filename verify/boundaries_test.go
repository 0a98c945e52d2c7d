package verify

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/perf"
	"ssmverify/ssm"
)

// chunkSeqlens are the sequence lengths around the boundaries of a chunked
// kernel: Mamba's selective scan works in chunks of 2048 steps and carries
// the state from one chunk to the next.
var chunkSeqlens = []int{2047, 2048, 2049, 4097, 3*2048 + 5}

// checkShape scans one generated problem of every declared method, dtype
// and real/complex A and fails with a diagnosis where it is wrong.
func checkShape(t *testing.T, s mamba1.Spec, seed uint64) {
	t.Helper()
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, isComplex := range []bool{false, true} {
				if (isComplex && fallback(m, dt)) || !judged(t.Name(), "scans of", m, dt, isComplex, false) {
					continue
				}
				s.Method, s.Complex = m, isComplex
				cmp, p, err := scanChecked(t.Name(), mamba1.Generate(within(s, dt), seed), dt)
				if errors.Is(err, errNotTaken) {
					continue
				}
				if err != nil {
					t.Errorf("%v %v %s %s: declared supported, but %v", m, dt, ssm.AKind(isComplex), s, err)
					continue
				}
				if !cmp.Passed(dt) {
					t.Errorf("%v %v %s %s: worst %s; threshold %g%s", m, dt, ssm.AKind(isComplex), s, cmp.Worst, judge.Threshold(dt),
						diagnosis(t.Name(), p, dt))
				}
			}
		}
	}
}

// TestChunkBoundaries: scans across 2048-step chunk boundaries, with
// variable B and C, every feature on, and the last state compared too.
func TestChunkBoundaries(t *testing.T) {
	track(t)
	for _, L := range chunkSeqlens {
		t.Run(strconv.Itoa(L), func(t *testing.T) {
			checkShape(t, mamba1.Spec{Batch: 1, Dim: 2, Seqlen: L, Dstate: 3, Groups: 1, VariableB: true, VariableC: true,
				Softplus: true, HasD: true, HasZ: true, HasBias: true, Dist: mamba1.Realistic}, uint64(L))
		})
	}
}

// TestUnstableProducts: mamba1.UnstableProducts, where a time-parallel scan
// forms products of Ā that overflow while the sequential state stays
// finite (and is 0, so that ∞·0 = NaN shows).
func TestUnstableProducts(t *testing.T) {
	track(t)
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, isComplex := range []bool{false, true} {
				if (isComplex && fallback(m, dt)) || !judged(t.Name(), "scans of", m, dt, isComplex, false) {
					continue
				}
				cmp, p, err := scanChecked(t.Name(), mamba1.UnstableProducts(m, dt, isComplex), dt)
				if errors.Is(err, errNotTaken) {
					continue
				}
				if err != nil {
					t.Errorf("%v %v %s: declared supported, but %v", m, dt, ssm.AKind(isComplex), err)
					continue
				}
				if !cmp.Passed(dt) {
					t.Errorf("%v %v %s unstable products: worst %s; threshold %g%s", m, dt, ssm.AKind(isComplex), cmp.Worst, judge.Threshold(dt),
						diagnosis(t.Name(), p, dt))
				}
			}
		}
	}
}

// TestLargestDstate: dstate = ssmk_max_dstate() across a chunk boundary.
func TestLargestDstate(t *testing.T) {
	track(t)
	checkShape(t, mamba1.Spec{Batch: 1, Dim: 1, Seqlen: 2049, Dstate: lib.MaxDstate(), Groups: 1, VariableB: true,
		Softplus: true, HasBias: true, Dist: mamba1.Realistic}, 7)
}

// TestManyRows: more than 65 535 rows (batch·dim and dim alone), where a
// kernel that launches one block per row in a grid's y or z dimension
// stops.
func TestManyRows(t *testing.T) {
	track(t)
	for _, s := range []mamba1.Spec{
		{Batch: 1, Dim: 65600, Seqlen: 3, Dstate: 2, Groups: 1, Dist: mamba1.Realistic},
		{Batch: 3, Dim: 21870, Seqlen: 3, Dstate: 2, Groups: 1, VariableB: true, Dist: mamba1.Realistic},
	} {
		t.Run(fmt.Sprintf("%dx%d", s.Batch, s.Dim), func(t *testing.T) {
			for _, dt := range ssm.DTypes() {
				for _, m := range []ssm.Method{ssm.ZOH, ssm.RK4} {
					if !judged(t.Name(), "scans of", m, dt, false, false) {
						continue
					}
					s.Method = m
					cmp, p, err := scanChecked(t.Name(), mamba1.Generate(within(s, dt), 9), dt)
					if errors.Is(err, errNotTaken) {
						continue
					}
					if err != nil {
						t.Errorf("%v %v %s: declared supported, but %v", m, dt, s, err)
						continue
					}
					if !cmp.Passed(dt) {
						t.Errorf("%v %v %s: worst %s%s", m, dt, s, cmp.Worst, diagnosis(t.Name(), p, dt))
					}
				}
			}
		})
	}
}

// argCase is one invalid argument of ssmk_scan_fwd and the words a message
// may name it by.
type argCase struct {
	field string
	value int32
	names []string
}

func argCases() []argCase {
	return []argCase{
		{"batch", 0, []string{"batch"}}, {"batch", -1, []string{"batch"}}, {"dim", 0, []string{"dim"}},
		{"seqlen", 0, []string{"seqlen"}}, {"seqlen", -5, []string{"seqlen"}}, {"dstate", 0, []string{"dstate"}},
		{"dstate", int32(lib.MaxDstate() + 1), []string{"dstate"}}, {"n_groups", 0, []string{"group"}},
		{"n_groups", 5, []string{"group"}}, {"method", 99, []string{"method"}}, {"method", -1, []string{"method"}},
		{"dtype", 7, []string{"dtype"}}, {"is_complex", 2, []string{"complex"}}, {"is_variable_B", 2, []string{"variable_b", "variable b"}},
		{"is_variable_C", -1, []string{"variable_c", "variable c"}}, {"delta_softplus", 3, []string{"softplus"}},
		{"u", 0, []string{"u"}}, {"delta", 0, []string{"delta"}}, {"A", 0, []string{"a"}}, {"B", 0, []string{"b"}},
		{"C", 0, []string{"c"}}, {"out", 0, []string{"out"}},
	}
}

// TestArgumentValidation judges how the library answers each invalid
// argument, by the ABI's rules rather than by wording: the status is
// SSMK_EINVAL (SSMK_EUNSUPPORTED also for an unknown method or dtype), the
// message is non-empty and names the argument, the inputs and out are left
// as they were. Each case runs in a child process, so that a library that
// crashes on one is reported as crashing there and the run goes on.
func TestArgumentValidation(t *testing.T) {
	track(t)
	for i, c := range argCases() {
		t.Run(fmt.Sprintf("%s=%d", c.field, c.value), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestArgumentValidationChild$", "-test.v")
			cmd.Env = append(os.Environ(), "SSMK_ARG_CASE="+strconv.Itoa(i))
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			err := cmd.Run()
			line := ""
			for _, l := range strings.Split(buf.String(), "\n") {
				if r, ok := strings.CutPrefix(strings.TrimSpace(l), "argcase: "); ok {
					line = r
				}
			}
			switch {
			case line == "" && err != nil:
				t.Errorf("the library crashed on %s = %d (%v): %s", c.field, c.value, err, lastLines(buf.String(), 5))
			case strings.HasPrefix(line, "FAIL "):
				t.Error(strings.TrimPrefix(line, "FAIL "))
			case line != "ok":
				t.Errorf("child process: %q (%v)", line, err)
			}
		})
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

// TestArgumentValidationChild is one case of TestArgumentValidation, run
// in a child process (SSMK_ARG_CASE); it reports on a line "argcase: …".
func TestArgumentValidationChild(t *testing.T) {
	k, err := strconv.Atoi(os.Getenv("SSMK_ARG_CASE"))
	if err != nil {
		t.Skip("run by TestArgumentValidation")
	}
	c := argCases()[k]
	fmt.Println("argcase:", judgeArgCase(c))
}

func judgeArgCase(c argCase) string {
	dt := ssm.F32
	if !lib.Capabilities(ssm.ZOH, dt, false).Supported() {
		dt = ssm.F64
	}
	s := mamba1.Spec{Batch: 2, Dim: 4, Seqlen: 9, Dstate: 3, Groups: 2, Method: ssm.ZOH, VariableB: true, VariableC: true, Dist: mamba1.Realistic}
	b, err := lib.NewScanBuffers(mamba1.Generate(s, 1), dt)
	if err != nil {
		return "FAIL building the buffers: " + err.Error()
	}
	for i := range b.Out.Bytes() {
		b.Out.Bytes()[i] = 0x5a
	}
	before := map[string]string{}
	for _, in := range append(b.Inputs(), cudalib.NamedArray{Name: "out", Array: b.Out}) {
		if in.Present() {
			before[in.Name] = perf.Hash(in.Bytes())
		}
	}
	err = lib.RunScanEdited(b, c.field, c.value)
	var e *cudalib.Error
	switch {
	case err == nil:
		return fmt.Sprintf("FAIL %s = %d accepted (SSMK_OK); want SSMK_EINVAL", c.field, c.value)
	case !errors.As(err, &e):
		return "FAIL " + err.Error()
	case e.Status != cudalib.EInval && !(e.Status == cudalib.EUnsupported && (c.field == "method" || c.field == "dtype")):
		return fmt.Sprintf("FAIL %s = %d: status %v, want SSMK_EINVAL", c.field, c.value, e.Status)
	case strings.TrimSpace(e.Msg) == "":
		return fmt.Sprintf("FAIL %s = %d: empty message", c.field, c.value)
	case !namesAny(e.Msg, c.names):
		return fmt.Sprintf("FAIL %s = %d: the message %q does not name the argument", c.field, c.value, e.Msg)
	}
	for _, in := range append(b.Inputs(), cudalib.NamedArray{Name: "out", Array: b.Out}) {
		if in.Present() && perf.Hash(in.Bytes()) != before[in.Name] {
			return fmt.Sprintf("FAIL %s = %d: the library wrote into %s although it refused the call", c.field, c.value, in.Name)
		}
	}
	return "ok"
}

// namesAny reports whether msg names the argument: one of names as a word
// (case-insensitive; a one-letter name must stand alone, as in "B is NULL").
func namesAny(msg string, names []string) bool {
	words := strings.FieldsFunc(strings.ToLower(msg), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	})
	text := " " + strings.Join(words, " ") + " "
	for _, n := range names {
		if len(n) == 1 {
			if strings.Contains(text, " "+n+" ") {
				return true
			}
		} else if strings.Contains(strings.ReplaceAll(text, "_", " "), strings.ReplaceAll(n, "_", " ")) {
			return true
		}
	}
	return false
}

// TestNamesAnyDecides: the argument check accepts a message that names the
// argument and refuses one that does not (a one-letter name must stand
// alone).
func TestNamesAnyDecides(t *testing.T) {
	for _, c := range []struct {
		msg   string
		names []string
		want  bool
	}{
		{"n_groups = 5 does not divide dim = 4", []string{"group"}, true},
		{"B is NULL", []string{"b"}, true},
		{"bad argument", []string{"b"}, false},
		{"invalid value", []string{"dstate"}, false},
		{"is_variable_B = 2, want 0 or 1", []string{"variable_b"}, true},
	} {
		if got := namesAny(c.msg, c.names); got != c.want {
			t.Errorf("namesAny(%q, %v) = %t, want %t", c.msg, c.names, got, c.want)
		}
	}
}
