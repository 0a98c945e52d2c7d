package fuzz

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ssmverify/ssm"
)

var update = flag.Bool("update", false, "rewrite the generated seed corpus in testdata/fuzz")

// corpusFile encodes fuzz arguments in the go test fuzz v1 format.
func corpusFile(args ...any) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case uint8:
			fmt.Fprintf(&b, "byte(%s)\n", strconv.QuoteRune(rune(v)))
		case bool:
			fmt.Fprintf(&b, "bool(%t)\n", v)
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		default:
			panic(fmt.Sprintf("corpusFile: %T", a))
		}
	}
	return b.Bytes()
}

type seed struct {
	name string
	file []byte
}

// backwardSeeds are FuzzScan's seeds (FuzzBackward decodes the same header
// and bytes; the 16-bit ones where the library declares their backward).
func backwardSeeds() []seed { return scanSeeds() }

// discretizeSeeds: for every method, dtype and real/complex, every special
// value as a (with Δ = 1, so x = a) and as Δ (with a = −1, and a = 2 so x
// = 2Δ crosses bilinear's pole), plus the named edge cases as one-element
// inputs.
func discretizeSeeds() []seed {
	var seeds []seed
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, isComplex := range []bool{false, true} {
				kind := ssm.AKind(isComplex)
				add := func(what string, e *Encoder) {
					name := fmt.Sprintf("%v-%v-%s-%s", m, dt, kind, what)
					seeds = append(seeds, seed{name, corpusFile(uint8(m), uint8(dt), isComplex, e.Bytes)})
				}
				xs := &Encoder{DType: dt} // x = a: Δ = 1
				for _, s := range Specials {
					xs.Special("1").Special(s.Name)
					if isComplex {
						xs.Special("0.5")
					}
				}
				add("x-specials", xs)
				ds := &Encoder{DType: dt} // Δ special, a = −1 (stable) …
				for _, s := range Specials {
					ds.Special(s.Name).Special("-1")
					if isComplex {
						ds.Special("1")
					}
				}
				add("delta-specials", ds)
				if isComplex {
					im := &Encoder{DType: dt} // … and Im a special, Re a = −1
					for _, s := range Specials {
						im.Special("1").Special("-1").Special(s.Name)
					}
					add("im-specials", im)
				}
				pole := &Encoder{DType: dt} // Δ·a at and around the bilinear pole x = 2
				for _, c := range [][2]string{{"1", "2"}, {"1", "2-ulp"}, {"1", "2+ulp"}, {"0.5", "2"}, {"2", "1"}, {"1", "-2"}} {
					pole.Special(c[0]).Special(c[1])
					if isComplex {
						pole.Special("0")
					}
				}
				add("pole", pole)
			}
		}
	}
	// foh's 0/0 at x = 0 and its series range, alone (one element).
	for _, dt := range ssm.DTypes() {
		for _, c := range []struct{ name, delta, a string }{
			{"delta0", "0", "-1"}, {"a0", "1", "0"}, {"x-1e-8", "1", "1e-8"}, {"x-subnormal", "1", "subnormal-min"},
			{"x-0.49", "1", "0.49"}, {"exp-overflow", "1", "log-max+1"}, {"nan", "NaN", "-1"}, {"inf", "1", "+Inf"},
		} {
			e := (&Encoder{DType: dt}).Special(c.delta).Special(c.a)
			seeds = append(seeds, seed{fmt.Sprintf("foh-%v-real-%s", dt, c.name), corpusFile(uint8(ssm.FOH), uint8(dt), false, e.Bytes)})
		}
	}
	return seeds
}

type scanSeed struct {
	name  string
	shape ScanShape
	data  func(dt ssm.DType) []byte
}

// scanSeeds: one-element shapes, dstate at the maximum, every feature flag,
// and special values placed in each input array in turn.
func scanSeeds() []seed {
	none := func(ssm.DType) []byte { return nil }
	specials := func(names ...string) func(ssm.DType) []byte {
		return func(dt ssm.DType) []byte {
			e := &Encoder{DType: dt}
			for _, n := range names {
				e.Special(n)
			}
			return e.Bytes
		}
	}
	all := uint8(FlagVariableB | FlagVariableC | FlagSoftplus | FlagD | FlagZ | FlagDeltaBias)
	// The ordinary prefix of u for a 1×1×L problem, so that specials land in
	// delta (the second array).
	uThenDelta := func(L int, delta ...string) func(ssm.DType) []byte {
		return func(dt ssm.DType) []byte {
			e := &Encoder{DType: dt}
			for i := 0; i < L; i++ {
				e.Ordinary(uint16(1000 * (i + 1)))
			}
			for _, n := range delta {
				e.Special(n)
			}
			return e.Bytes
		}
	}
	base := []scanSeed{
		{"one-element", ScanShape{}, none},
		{"one-element-complex", ScanShape{Flags: FlagComplex}, none},
		{"dstate-max", ScanShape{Seqlen: 3, Dstate: 200}, none},
		{"dstate-max-complex-all-flags", ScanShape{Seqlen: 2, Dstate: 200, Flags: all | FlagComplex}, none},
		{"all-flags", ScanShape{Batch: 1, Dim: 3, Seqlen: 17, Dstate: 7, Groups: 1, Flags: all}, none},
		{"all-flags-complex", ScanShape{Batch: 1, Dim: 3, Seqlen: 17, Dstate: 7, Groups: 1, Flags: all | FlagComplex}, none},
		{"no-last-state", ScanShape{Dim: 1, Seqlen: 5, Dstate: 3, Flags: FlagNoLastState | FlagZ}, none},
		{"softplus-threshold", ScanShape{Seqlen: 7, Dstate: 2, Flags: FlagSoftplus},
			uThenDelta(8, "20", "20-ulp", "20+ulp", "-max", "max", "log-max", "-100", "0")},
		{"huge-delta", ScanShape{Seqlen: 3, Dstate: 1}, uThenDelta(4, "1e30", "max", "sqrt-max")},
		{"delta-zero", ScanShape{Seqlen: 3, Dstate: 2}, uThenDelta(4, "0", "-0", "0")},
		{"delta-nan-inf", ScanShape{Seqlen: 4, Dstate: 2}, uThenDelta(5, "1", "NaN", "+Inf", "-Inf")},
		{"a-zero", ScanShape{Seqlen: 3, Dstate: 2}, uThenDelta(4, "1", "1", "1", "0", "-0")},
		{"a-unstable-overflow", ScanShape{Seqlen: 39, Dstate: 0}, uThenDelta(40, "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "log-max")},
		{"u-specials", ScanShape{Seqlen: 9, Dstate: 1}, specials("NaN", "+Inf", "-Inf", "subnormal-min", "subnormal-max", "max", "-max", "0", "-0", "1")},
		{"u-subnormal", ScanShape{Seqlen: 3, Dstate: 1}, specials("subnormal-min", "subnormal-max", "normal-min", "-normal-min")},
		// Long problems (Batch ≥ 128: LongSteps more steps), which reach the
		// GPU kernels' fast paths: Mamba-like values, Δ = 1 (every state
		// with |a| ≥ 1/2 on foh's far branch), and u's special values.
		{"long-all-flags", ScanShape{Batch: 128 | 1, Dim: 3, Seqlen: 17, Dstate: 15, Groups: 1, Flags: all}, none},
		{"long-delta-one", ScanShape{Batch: 128, Seqlen: 3, Dstate: 15, Flags: FlagVariableB | FlagVariableC},
			uThenDelta(4, "1", "1", "1", "1")},
		{"long-u-specials", ScanShape{Batch: 128, Seqlen: 9, Dstate: 1}, specials("NaN", "+Inf", "-Inf", "subnormal-min", "subnormal-max", "max", "-max", "0", "-0", "1")},
		// Scans from an initial state (ssmk_scan_fwd_state), short and long.
		{"initial-state", ScanShape{Batch: 1, Dim: 1, Seqlen: 8, Dstate: 3, Groups: GroupsInitialState | 1, Flags: all}, none},
		{"long-initial-state-complex", ScanShape{Batch: 128 | 1, Dim: 1, Seqlen: 5, Dstate: 4, Groups: GroupsInitialState, Flags: all | FlagComplex}, none},
	}
	var seeds []seed
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, s := range base {
				sh := s.shape
				sh.Method, sh.DType = uint8(m), uint8(dt)
				seeds = append(seeds, seed{fmt.Sprintf("%v-%v-%s", m, dt, s.name),
					corpusFile(sh.Method, sh.DType, sh.Flags, sh.Batch, sh.Dim, sh.Seqlen, sh.Dstate, sh.Groups, s.data(dt))})
			}
		}
	}
	// The 16-bit input types (GroupsNarrow; DType bit 0: fp16 or bf16):
	// values decoded as fp32's, then rounded to the type, so u's special
	// values saturate at fp16's 65504 and flush below its subnormals.
	narrow := map[string]bool{"all-flags": true, "all-flags-complex": true, "no-last-state": true, "softplus-threshold": true,
		"huge-delta": true, "u-specials": true, "u-subnormal": true, "long-all-flags": true, "long-u-specials": true, "initial-state": true}
	for _, m := range ssm.Methods() {
		for i, dt := range ssm.NarrowDTypes() {
			for _, s := range base {
				if !narrow[s.name] {
					continue
				}
				sh := s.shape
				sh.Method, sh.DType, sh.Groups = uint8(m), uint8(i), sh.Groups|GroupsNarrow
				seeds = append(seeds, seed{fmt.Sprintf("%v-%v-%s", m, dt, s.name),
					corpusFile(sh.Method, sh.DType, sh.Flags, sh.Batch, sh.Dim, sh.Seqlen, sh.Dstate, sh.Groups, s.data(ssm.F32))})
			}
		}
	}
	return seeds
}

// TestSeedCorpus: the committed seed corpus is exactly what the generators
// above write (go test ./fuzz -run TestSeedCorpus -update rewrites it).
// Files with other names, such as failures the fuzzer found, are kept.
func TestSeedCorpus(t *testing.T) {
	for target, seeds := range map[string][]seed{"FuzzDiscretize": discretizeSeeds(), "FuzzScan": scanSeeds(),
		"FuzzBackward": backwardSeeds()} {
		dir := filepath.Join("testdata", "fuzz", target)
		for _, s := range seeds {
			path := filepath.Join(dir, "seed-"+s.name)
			if *update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, s.file, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%v (run go test ./fuzz -run TestSeedCorpus -update)", err)
				continue
			}
			if !bytes.Equal(got, s.file) {
				t.Errorf("%s differs from its generator (run go test ./fuzz -run TestSeedCorpus -update)", path)
			}
		}
		if *update {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		known := map[string]bool{}
		for _, s := range seeds {
			known["seed-"+s.name] = true
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "seed-") && !known[e.Name()] {
				t.Errorf("%s: a seed- file no generator writes (remove it, or commit a found failure under its own name)", filepath.Join(dir, e.Name()))
			}
		}
	}
}
