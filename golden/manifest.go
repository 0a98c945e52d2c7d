package golden

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// ManifestSchema names the version of manifest.json's layout.
const ManifestSchema = "ssmverify.golden/v1"

// Manifest is golden/manifest.json.
type Manifest struct {
	Schema    string `json:"schema"`
	Generator string `json:"generator"`
	Note      string `json:"note"`
	Cases     []Case `json:"cases"`
}

// Case is one golden problem: its flags, shapes, how it was generated, and
// its files (inputs u, delta, A, B, C and the present optional ones; outputs
// out and last_state).
type Case struct {
	Name          string `json:"name"`
	Method        string `json:"method"`
	Complex       bool   `json:"complex"`
	Batch         int    `json:"batch"`
	Dim           int    `json:"dim"`
	Seqlen        int    `json:"seqlen"`
	Dstate        int    `json:"dstate"`
	Groups        int    `json:"n_groups"`
	VariableB     bool   `json:"is_variable_B"`
	VariableC     bool   `json:"is_variable_C"`
	DeltaSoftplus bool   `json:"delta_softplus"`
	Dist          string `json:"dist"`
	Seed          uint64 `json:"seed"`
	// DType is "" for a case of the full-precision dtypes (float64 files,
	// judged in fp64 and, rounded, in fp32), or "fp16" or "bf16" for a
	// mixed-precision case: its inputs u, delta, z and variable B and C
	// are of that type (File.Encoding), its weights float32 values stored
	// as float64, and it is judged in that dtype alone. Its out_rounded is
	// the exact out rounded once to the type: what an exact kernel stores.
	DType string          `json:"dtype,omitempty"`
	Files map[string]File `json:"files"`
}

// File is one array of a case.
type File struct {
	File   string `json:"file"` // relative to the golden folder
	Shape  []int  `json:"shape"`
	SHA256 string `json:"sha256"`
	// Encoding is "" (float64, '<f8'), "float16" ('<f2') or "bfloat16"
	// ('<u2' bit patterns; EncBFloat16 says how NumPy reads them).
	Encoding string `json:"encoding,omitempty"`
}

// Entry is a golden case before generation: a name, a mamba1.Spec and a seed,
// or, for a case found by the fuzzers, Build, which returns its problem.
type Entry struct {
	Name  string
	Spec  mamba1.Spec
	Seed  uint64
	Build func() *ssm.Problem
	// DType, for a mixed-precision case (F16, BF16): the problem's inputs
	// are rounded to it (ssm.Problem.RoundTo); 0 (F32) otherwise.
	DType ssm.DType
	// Grads: the case also holds a cotangent (dout, dlast_state, seeded by
	// Seed) and the exact gradients of its backward pass (ExactGrad).
	Grads bool
	// DoutOnly: the cotangent is dout alone (no dlast_state file), so that
	// a backward that takes no gradient of the last state (Mamba's,
	// SSMK_CAP_BWD_OUTPUTS_ONLY) is judged against golden gradients too.
	DoutOnly bool
}

// problem returns the entry's problem and the name of its distribution.
func (e Entry) problem() (*ssm.Problem, string) {
	var p *ssm.Problem
	dist := "fuzz"
	if e.Build != nil {
		p = e.Build()
	} else {
		p, dist = mamba1.Generate(e.Spec, e.Seed), e.Spec.Dist.String()
	}
	if e.DType.Narrow() {
		p.RoundTo(e.DType)
	}
	return p, dist
}

// narrowEntries are the mixed-precision cases: every method in the Mamba
// block with real A, zoh with complex A, in fp16 and bf16, each with its
// backward pass for dout alone (dout of the 16-bit type, as a backward of
// SSMK_CAP_BWD_NARROW takes it), and fp16's overflow (outputs past 65520,
// which an exact kernel stores as ±Inf).
func narrowEntries() []Entry {
	var out []Entry
	for _, dt := range ssm.NarrowDTypes() {
		for _, m := range ssm.Methods() {
			s := mamba1.MambaBlock(m, 2, 4, 24, 5)
			out = append(out, Entry{Name: fmt.Sprintf("%v-real-mamba-%v", m, dt), Spec: s, Seed: uint64(700 + 10*int(m) + int(dt)), DType: dt,
				Grads: true, DoutOnly: true})
		}
		s := mamba1.MambaBlock(ssm.ZOH, 2, 4, 24, 5)
		s.Complex = true
		out = append(out, Entry{Name: fmt.Sprintf("zoh-complex-mamba-%v", dt), Spec: s, Seed: uint64(790 + int(dt)), DType: dt,
			Grads: true, DoutOnly: true})
	}
	out = append(out, Entry{Name: "zoh-real-overflow-fp16", DType: ssm.F16, Build: func() *ssm.Problem {
		// a = 0: Ā = 1, the state sums Δ·B·u: 30000, 60000, 90000, 120000, then back to 20000
		return &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 5, Dstate: 1, Groups: 1, Method: ssm.ZOH,
			U: []float64{30000, 30000, 30000, 30000, -100000}, Delta: []float64{1, 1, 1, 1, 1},
			A: []float64{0}, B: []float64{1}, C: []float64{1}}
	}})
	return out
}

// fuzzFound are golden cases from kernel behaviour the fuzzers showed.
var fuzzFound = []Entry{
	// FuzzDiscretize: foh with complex A and Δ = FLT_MAX overflowed the
	// denominator of Smith's division in float32 (x = Δ·a ≈ ±FLT_MAX), and
	// B̄ = Δ·φ1(x) came out 0 instead of −1/a = 0.5 + 0.5i.
	{Name: "fuzz-foh-complex-delta-flt-max", Build: func() *ssm.Problem {
		return &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 3, Dstate: 2, Groups: 1, Method: ssm.FOH, Complex: true,
			U: []float64{1, -0.5, 0.25}, Delta: []float64{math.MaxFloat32, 1, 0.5},
			A: []float64{-1, 1, -0.5, 0.75}, B: []float64{1, 0, 0.5, -0.5}, C: []float64{1, 0.5, -1, 0.25}}
	}},
	// FuzzDiscretize on the H200: __fdividef returns 0 for divisors beyond
	// 2^126, so bilinear's g = 1/(1 − x/2) at x = −FLT_MAX was 0 and
	// B̄ = Δ·g = 2 came out 0.
	{Name: "fuzz-bilinear-real-delta-flt-max", Build: func() *ssm.Problem {
		return &ssm.Problem{Batch: 1, Dim: 2, Seqlen: 3, Dstate: 2, Groups: 1, Method: ssm.Bilinear,
			U: []float64{1, -0.5, 0.25, 0.5, 2, -1}, Delta: []float64{math.MaxFloat32, 0.5, math.MaxFloat32, 1, math.MaxFloat32, 0.25},
			A: []float64{-1, -0.5, -0.75, -1}, B: []float64{1, -0.5, 0.25, 2}, C: []float64{0.5, 1, -1, 0.125}}
	}},
	// FuzzDiscretize in CI: foh with complex x = 88.72 − 79.45i, where
	// e^x − 1 ≈ 3e38 is near the top of float32's range: the numerators of
	// Smith's division overflowed and B̄ came out ∞ instead of −5.6e37 + 1.0e37i.
	// One step (h starts at 0, so Ā = e^x, also near the top, is not applied).
	{Name: "fuzz-foh-complex-numerator-near-flt-max", Build: func() *ssm.Problem {
		return &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 1, Dstate: 1, Groups: 1, Method: ssm.FOH, Complex: true,
			U: []float64{0.5}, Delta: []float64{20}, A: []float64{4.436119079589844, -3.9727439880371094},
			B: []float64{1, 0.25}, C: []float64{1e-30, 5e-31}}
	}},
}

// Entries lists the golden cases: every method × real/complex A × three
// feature sets (plain; the Mamba block with every feature; variable B and C
// in two groups with stressing inputs), each with its backward pass, and
// the Mamba block again with a cotangent of dout alone.
func Entries() []Entry {
	var out []Entry
	for _, m := range ssm.Methods() {
		for _, isComplex := range []bool{false, true} {
			kind := ssm.AKind(isComplex)
			sets := []struct {
				name string
				s    mamba1.Spec
			}{
				{"plain", mamba1.Spec{Batch: 1, Dim: 3, Seqlen: 17, Dstate: 4, Groups: 1}},
				{"mamba", mamba1.MambaBlock(m, 2, 4, 24, 5)},
				{"groups-stress", mamba1.Spec{Batch: 2, Dim: 4, Seqlen: 13, Dstate: 3, Groups: 2, VariableB: true, VariableC: true,
					HasD: true, HasBias: true, Softplus: true, Dist: mamba1.Stress}},
			}
			for i, set := range sets {
				s := set.s
				s.Method, s.Complex = m, isComplex
				seed := uint64(100*int(m) + 10*i + 1)
				if isComplex {
					seed++
				}
				out = append(out, Entry{Name: fmt.Sprintf("%v-%s-%s", m, kind, set.name), Spec: s, Seed: seed, Grads: true})
			}
			s := sets[1].s // the Mamba block again, with dout alone
			s.Method, s.Complex = m, isComplex
			seed := uint64(100*int(m) + 51)
			if isComplex {
				seed++
			}
			out = append(out, Entry{Name: fmt.Sprintf("%v-%s-mamba-dout-only", m, kind), Spec: s, Seed: seed, Grads: true, DoutOnly: true})
		}
	}
	out = append(out, fuzzFound...)
	return append(out, narrowEntries()...)
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// array is one golden file's content: its shape, values and encoding.
type array struct {
	shape []int
	data  []float64
	enc   string
}

// arrays returns a problem's arrays by ABI name with their shapes; for a
// 16-bit dtype dt the inputs in its encoding and out_rounded, the exact
// output rounded to it.
func arrays(p *ssm.Problem, out *ssm.Output, dt ssm.DType) map[string]array {
	cw := []int{}
	if p.Complex {
		cw = []int{2}
	}
	in := EncodingOf(dt)
	bc := func(variable bool) ([]int, string) {
		if variable {
			return append([]int{p.Batch, p.Groups, p.Dstate, p.Seqlen}, cw...), in
		}
		return append([]int{p.Dim, p.Dstate}, cw...), EncFloat64
	}
	seq := []int{p.Batch, p.Dim, p.Seqlen}
	bShape, bEnc := bc(p.VariableB)
	cShape, cEnc := bc(p.VariableC)
	m := map[string]array{
		"u": {seq, p.U, in}, "delta": {seq, p.Delta, in}, "A": {append([]int{p.Dim, p.Dstate}, cw...), p.A, EncFloat64},
		"B": {bShape, p.B, bEnc}, "C": {cShape, p.C, cEnc},
		"out": {seq, out.Out, EncFloat64}, "last_state": {append([]int{p.Batch, p.Dim, p.Dstate}, cw...), out.LastState, EncFloat64},
	}
	if dt.Narrow() {
		r := make([]float64, len(out.Out))
		for i, v := range out.Out {
			r[i] = dt.Round(v)
		}
		m["out_rounded"] = array{seq, r, in}
	}
	if p.D != nil {
		m["D"] = array{[]int{p.Dim}, p.D, EncFloat64}
	}
	if p.DeltaBias != nil {
		m["delta_bias"] = array{[]int{p.Dim}, p.DeltaBias, EncFloat64}
	}
	if p.Z != nil {
		m["z"] = array{seq, p.Z, in}
	}
	return m
}

// gradArrays adds a case's cotangent and gradients by ABI name ("dout",
// "dlast_state", "du", …), each in the shape of the array it belongs to.
func gradArrays(m map[string]array, ct *ssm.Cotangent, g *ssm.Grads, dt ssm.DType) {
	m["dout"] = array{m["out"].shape, ct.Out, EncodingOf(dt)}
	if ct.LastState != nil {
		m["dlast_state"] = array{m["last_state"].shape, ct.LastState, EncFloat64}
	}
	of := map[string]string{"du": "u", "ddelta": "delta", "dA": "A", "dB": "B", "dC": "C", "dD": "D", "dz": "z",
		"ddelta_bias": "delta_bias"}
	for _, f := range g.Fields() {
		m[f.Name] = array{m[of[f.Name]].shape, f.Values, EncFloat64}
	}
}

// Generate writes every case and manifest.json into dir (replacing
// dir/cases).
func Generate(dir string) (*Manifest, error) {
	if err := os.RemoveAll(filepath.Join(dir, "cases")); err != nil {
		return nil, err
	}
	man := &Manifest{Schema: ManifestSchema, Generator: "go test ./golden -update",
		Note: "float64, C order; complex arrays end in an axis of 2 (re, im); out = the ssmk ABI forward scan, last_state = h after the last step; " +
			"outputs from the exact scan (256-bit arithmetic, golden.ExactScan) rounded once to float64, not from the reference; " +
			"cases with a dtype (fp16, bf16) hold their inputs u, delta, z and variable B/C in that type (files with encoding float16: NumPy '<f2'; " +
			"bfloat16: '<u2' bit patterns, read as (np.load(f).astype(np.uint32) << 16).view(np.float32)), their weights as float64 values of float32, " +
			"and out_rounded, the exact out rounded once to the type; " +
			"cases with dout hold the backward pass: dout (in a case's dtype, as its inputs) and dlast_state (the gradient of a real loss with respect to out and last_state; " +
			"no dlast_state file: dout alone, for a backward that takes no gradient of the last state), " +
			"and du, ddelta, dA, dB, dC, dD, dz, ddelta_bias, each shaped as its input (dA, constant dB/dC, dD and ddelta_bias summed over batch and time; " +
			"variable dB/dC over the channels of a group; ddelta through delta_bias and softplus; complex: d/dRe + i·d/dIm), " +
			"from the adjoint of the exact scan (golden.ExactGrad) rounded once to float64"}
	for _, c := range Entries() {
		p, dist := c.problem()
		out, err := ExactScan(p)
		if err != nil {
			return nil, fmt.Errorf("golden: %s: %w", c.Name, err)
		}
		gc := Case{Name: c.Name, Method: p.Method.String(), Complex: p.Complex, Batch: p.Batch, Dim: p.Dim,
			Seqlen: p.Seqlen, Dstate: p.Dstate, Groups: p.Groups, VariableB: p.VariableB, VariableC: p.VariableC,
			DeltaSoftplus: p.Softplus, Dist: dist, Seed: c.Seed, Files: map[string]File{}}
		if c.DType.Narrow() {
			gc.DType = c.DType.String()
		}
		if err := os.MkdirAll(filepath.Join(dir, "cases", c.Name), 0o755); err != nil {
			return nil, err
		}
		files := arrays(p, out, c.DType)
		if c.Grads {
			ct := mamba1.NewCotangent(p, c.Seed, !c.DoutOnly)
			if c.DType.Narrow() {
				ct.RoundTo(c.DType) // dout of the input type, exactly what a kernel reads
			}
			g, err := ExactGrad(p, ct, false)
			if err != nil {
				return nil, fmt.Errorf("golden: %s: gradients: %w", c.Name, err)
			}
			gradArrays(files, ct, g, c.DType)
		}
		if gc.Files, err = writeArrays(dir, filepath.Join("cases", c.Name), files); err != nil {
			return nil, fmt.Errorf("golden: %s: %w", c.Name, err)
		}
		man.Cases = append(man.Cases, gc)
	}
	return man, writeJSON(filepath.Join(dir, "manifest.json"), man)
}

// writeArrays writes each array as folder/NAME.npy under root and returns
// the manifest's entries for them (paths relative to root).
func writeArrays(root, folder string, arrays map[string]array) (map[string]File, error) {
	files := map[string]File{}
	for name, a := range arrays {
		b, err := EncodeNPYAs(a.shape, a.data, a.enc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rel := filepath.Join(folder, name+".npy")
		if err := os.WriteFile(filepath.Join(root, rel), b, 0o644); err != nil {
			return nil, err
		}
		files[name] = File{File: rel, Shape: a.shape, SHA256: sum(b), Encoding: a.enc}
	}
	return files, nil
}

// writeJSON writes v indented, with a final newline.
func writeJSON(path string, v any) error {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(js, '\n'), 0o644)
}

// checkFiles checks that every file of a case, under root, has the
// checksum the manifest records: a missing or altered file is an error
// naming it and the checksum expected.
func checkFiles(root, caseName string, files map[string]File) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := files[n]
		data, err := os.ReadFile(filepath.Join(root, f.File))
		if err != nil {
			return fmt.Errorf("golden: case %s: %s is missing (manifest expects sha256 %s): %w", caseName, f.File, f.SHA256, err)
		}
		if got := sum(data); got != f.SHA256 {
			return fmt.Errorf("golden: case %s: %s has sha256 %s, manifest expects %s: the file was altered (regenerate deliberately with `go test ./golden -update`)",
				caseName, f.File, got, f.SHA256)
		}
	}
	return nil
}

// Load reads manifest.json from dir and checks every file's checksum. A
// missing or altered file is an error naming the file and the checksum the
// manifest expects.
func Load(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("golden: %w (regenerate with `go test ./golden -update`)", err)
	}
	var man Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return nil, fmt.Errorf("golden: manifest.json: %w", err)
	}
	if man.Schema != ManifestSchema {
		return nil, fmt.Errorf("golden: manifest.json has schema %q, want %q", man.Schema, ManifestSchema)
	}
	for _, c := range man.Cases {
		if err := checkFiles(dir, c.Name, c.Files); err != nil {
			return nil, err
		}
	}
	return &man, nil
}

// Type is the dtype a case is judged in: F16 or BF16 for a mixed-precision
// case; for the others F32 (they are judged in fp64 and fp32 both).
func (c Case) Type() (ssm.DType, error) {
	if c.DType == "" {
		return ssm.F32, nil
	}
	dt, err := ssm.ParseDType(c.DType)
	if err != nil || !dt.Narrow() {
		return 0, fmt.Errorf("golden: case %s: dtype %q: want fp16, bf16 or none", c.Name, c.DType)
	}
	return dt, nil
}

// HasGrads reports whether the case holds its backward pass.
func (c Case) HasGrads() bool {
	_, ok := c.Files["dout"]
	return ok
}

// Grads reads a case's cotangent and exact gradients (HasGrads).
func (c Case) Grads(dir string) (*ssm.Cotangent, *ssm.Grads, error) {
	if !c.HasGrads() {
		return nil, nil, fmt.Errorf("golden: case %s holds no backward pass", c.Name)
	}
	read := func(name string) ([]float64, error) {
		f, ok := c.Files[name]
		if !ok {
			return nil, nil
		}
		_, d, err := ReadNPYAs(filepath.Join(dir, f.File), f.Encoding)
		return d, err
	}
	ct, g := &ssm.Cotangent{}, &ssm.Grads{}
	for _, a := range []struct {
		name string
		dst  *[]float64
	}{{"dout", &ct.Out}, {"dlast_state", &ct.LastState}, {"du", &g.U}, {"ddelta", &g.Delta}, {"dA", &g.A}, {"dB", &g.B},
		{"dC", &g.C}, {"dD", &g.D}, {"dz", &g.Z}, {"ddelta_bias", &g.DeltaBias}} {
		d, err := read(a.name)
		if err != nil {
			return nil, nil, err
		}
		*a.dst = d
	}
	return ct, g, nil
}

// Narrow reports whether the case is a mixed-precision one.
func (c Case) Narrow() bool { return c.DType != "" }

// Problem rebuilds a case's problem and expected output from its files.
func (c Case) Problem(dir string) (*ssm.Problem, *ssm.Output, error) {
	m, err := ssm.ParseMethod(c.Method)
	if err != nil {
		return nil, nil, fmt.Errorf("golden: case %s: %w", c.Name, err)
	}
	p := &ssm.Problem{Batch: c.Batch, Dim: c.Dim, Seqlen: c.Seqlen, Dstate: c.Dstate, Groups: c.Groups,
		Method: m, Complex: c.Complex, VariableB: c.VariableB, VariableC: c.VariableC, Softplus: c.DeltaSoftplus}
	out := &ssm.Output{}
	read := func(name string, dst *[]float64, required bool) error {
		f, ok := c.Files[name]
		if !ok {
			if required {
				return fmt.Errorf("golden: case %s lists no file for %s", c.Name, name)
			}
			return nil
		}
		_, d, err := ReadNPYAs(filepath.Join(dir, f.File), f.Encoding)
		if err != nil {
			return err
		}
		*dst = d
		return nil
	}
	for _, a := range []struct {
		name     string
		dst      *[]float64
		required bool
	}{
		{"u", &p.U, true}, {"delta", &p.Delta, true}, {"A", &p.A, true}, {"B", &p.B, true}, {"C", &p.C, true},
		{"D", &p.D, false}, {"z", &p.Z, false}, {"delta_bias", &p.DeltaBias, false},
		{"out", &out.Out, true}, {"last_state", &out.LastState, true},
	} {
		if err := read(a.name, a.dst, a.required); err != nil {
			return nil, nil, err
		}
	}
	if err := p.Validate(); err != nil {
		return nil, nil, fmt.Errorf("golden: case %s: %w", c.Name, err)
	}
	return p, out, nil
}
