package golden

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"ssmverify/mamba3"
)

// Mamba3Schema names the version of mamba3/manifest.json's layout.
const Mamba3Schema = "ssmverify.golden-mamba3/v1"

// Mamba3Manifest is golden/mamba3/manifest.json: Mamba-3 SISO forward
// cases, inputs and outputs as float64 .npy in upstream's layout.
type Mamba3Manifest struct {
	Schema    string       `json:"schema"`
	Generator string       `json:"generator"`
	Note      string       `json:"note"`
	Cases     []Mamba3Case `json:"cases"`
}

// Mamba3Case is one golden Mamba-3 problem: sizes, generator and seed,
// files (name → File).
type Mamba3Case struct {
	Name    string          `json:"name"`
	Options mamba3.Options  `json:"options"`
	Seed    uint64          `json:"seed"`
	Files   map[string]File `json:"files"`
}

// Mamba3Entries are the golden cases: plain, every option with heads
// sharing q/k, a packed row with per-sequence states, angles that wrap many
// times, all pairs rotating.
func Mamba3Entries() []Mamba3Case {
	o := mamba3.Options{Batch: 2, Seqlen: 24, HeadsQK: 1, Heads: 2, N: 8, P: 4, AngleDim: 2}
	all := o
	all.HeadsQK, all.D, all.Z, all.State = 1, true, true, true
	packed := o
	packed.Batch, packed.CuSeqlens, packed.State, packed.D = 1, []int{0, 9, 10, 24}, true, true
	full := o
	full.AngleDim, full.State = o.N/2, true
	wrap := o
	wrap.Seqlen = 64
	return []Mamba3Case{{Name: "plain", Options: o, Seed: 1}, {Name: "all-options", Options: all, Seed: 2},
		{Name: "packed", Options: packed, Seed: 3}, {Name: "all-pairs", Options: full, Seed: 4},
		{Name: "angles-wrap", Options: wrap, Seed: 5}}
}

// Problem returns the case's problem from its generator.
func (c Mamba3Case) Problem() *mamba3.Problem {
	p := mamba3.Generate(c.Options, c.Seed)
	if c.Name == "angles-wrap" {
		for i := range p.DT {
			p.DT[i] *= 30 // Δ up to 3: the angles turn several times
			p.ADT[i] = -0.02 * p.DT[i]
		}
	}
	return p
}

func mamba3Arrays(p *mamba3.Problem, y []float64, st *mamba3.State) map[string]array {
	B, L, Hqk, H, N, P, A, S := p.Batch, p.Seqlen, p.HeadsQK, p.Heads, p.N, p.P, p.AngleDim, p.NumSeqs()
	m := map[string]array{
		"Q": {[]int{B, L, Hqk, N}, p.Q, EncFloat64}, "K": {[]int{B, L, Hqk, N}, p.K, EncFloat64}, "V": {[]int{B, L, H, P}, p.V, EncFloat64},
		"ADT": {[]int{B, H, L}, p.ADT, EncFloat64}, "DT": {[]int{B, H, L}, p.DT, EncFloat64}, "Trap": {[]int{B, H, L}, p.Trap, EncFloat64},
		"Q_bias": {[]int{H, N}, p.QBias, EncFloat64}, "K_bias": {[]int{H, N}, p.KBias, EncFloat64}, "Angles": {[]int{B, L, H, A}, p.Angles, EncFloat64},
		"y": {[]int{B, L, H, P}, y, EncFloat64}, "angle": {[]int{S, H, A}, st.Angle, EncFloat64}, "ssm": {[]int{S, H, P, N}, st.SSM, EncFloat64},
		"k": {[]int{S, H, N}, st.K, EncFloat64}, "v": {[]int{S, H, P}, st.V, EncFloat64},
	}
	if p.D != nil {
		m["D"] = array{[]int{H}, p.D, EncFloat64}
	}
	if p.Z != nil {
		m["Z"] = array{[]int{B, L, H, P}, p.Z, EncFloat64}
	}
	if s := p.State; s != nil {
		m["state_angle"] = array{[]int{S, H, A}, s.Angle, EncFloat64}
		m["state_ssm"] = array{[]int{S, H, P, N}, s.SSM, EncFloat64}
		m["state_k"] = array{[]int{S, H, N}, s.K, EncFloat64}
		m["state_v"] = array{[]int{S, H, P}, s.V, EncFloat64}
	}
	return m
}

// GenerateMamba3 writes every Mamba-3 case and mamba3/manifest.json into
// dir/mamba3, outputs from ExactMamba3.
func GenerateMamba3(dir string) (*Mamba3Manifest, error) {
	root := filepath.Join(dir, "mamba3")
	if err := os.RemoveAll(root); err != nil {
		return nil, err
	}
	man := &Mamba3Manifest{Schema: Mamba3Schema, Generator: "go test ./golden -update",
		Note: "Mamba-3 SISO forward (package mamba3's documentation: the kernels' step reference), float64, C order, upstream's layout " +
			"(Q, K [b][l][h_qk][n]; V, Z, y [b][l][h][p]; ADT, DT, Trap [b][h][l]; Angles [b][l][h][a]; states per sequence); " +
			"outputs y and the final angle, ssm, k, v states from a 256-bit evaluation (golden.ExactMamba3) rounded once to float64"}
	for _, c := range Mamba3Entries() {
		p := c.Problem()
		y, st := ExactMamba3(p)
		if err := os.MkdirAll(filepath.Join(root, c.Name), 0o755); err != nil {
			return nil, err
		}
		var err error
		if c.Files, err = writeArrays(root, c.Name, mamba3Arrays(p, y, st)); err != nil {
			return nil, fmt.Errorf("golden: mamba3 %s: %w", c.Name, err)
		}
		man.Cases = append(man.Cases, c)
	}
	return man, writeJSON(filepath.Join(root, "manifest.json"), man)
}

// LoadMamba3 reads dir/mamba3/manifest.json and checks every file's
// checksum.
func LoadMamba3(dir string) (*Mamba3Manifest, error) {
	root := filepath.Join(dir, "mamba3")
	b, err := os.ReadFile(filepath.Join(root, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("golden: %w (regenerate with `go test ./golden -update`)", err)
	}
	var man Mamba3Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		return nil, err
	}
	if man.Schema != Mamba3Schema {
		return nil, fmt.Errorf("golden: mamba3/manifest.json has schema %q, want %q", man.Schema, Mamba3Schema)
	}
	for _, c := range man.Cases {
		if err := checkFiles(root, "mamba3 "+c.Name, c.Files); err != nil {
			return nil, err
		}
	}
	return &man, nil
}

// Outputs reads a case's golden y and final states.
func (c Mamba3Case) Outputs(dir string) ([]float64, *mamba3.State, error) {
	read := func(name string) ([]float64, error) {
		_, v, err := ReadNPY(filepath.Join(dir, "mamba3", c.Files[name].File))
		return v, err
	}
	var out [5][]float64
	for i, n := range []string{"y", "angle", "ssm", "k", "v"} {
		v, err := read(n)
		if err != nil {
			return nil, nil, err
		}
		out[i] = v
	}
	return out[0], &mamba3.State{Angle: out[1], SSM: out[2], K: out[3], V: out[4]}, nil
}
