package golden

import (
	"encoding/json"
	"flag"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

var update = flag.Bool("update", false, "regenerate golden/ from mamba1.Generate and the exact scan (ExactScan)")

func TestMain(m *testing.M) {
	flag.Parse()
	if *update {
		man, err := Generate(".")
		if err != nil {
			panic(err)
		}
		println("golden: wrote", len(man.Cases), "cases")
		m3, err := GenerateMamba3(".")
		if err != nil {
			panic(err)
		}
		println("golden: wrote", len(m3.Cases), "Mamba-3 cases")
	}
	os.Exit(m.Run())
}

// TestGoldenReferenceReproduces: the float64 reference against the golden
// outputs, which come from the exact scan (ExactScan) and not from it: every
// output and last-state element within the reference's own error model
// (judge's float64 threshold on the scaled ratio). A slip in the reference
// — a sign, a dropped term, a flag read the other way — fails here.
func TestGoldenReferenceReproduces(t *testing.T) {
	man, err := Load(".")
	require.NoError(t, err)
	require.Len(t, man.Cases, len(Entries()), "the manifest lists every golden case")
	for _, c := range man.Cases {
		p, want, err := c.Problem(".")
		require.NoError(t, err)
		got, err := mamba1.Scan(p, ssm.Float64)
		require.NoError(t, err)
		cmp, err := judge.CompareScan(p, &ssm.Output{Out: got.Out, LastState: got.LastState}, ssm.F64, want, nil)
		require.NoError(t, err)
		if !cmp.Passed(ssm.F64) {
			t.Errorf("%s: the reference is off the exact scan: worst %s", c.Name, cmp.Worst)
		}
	}
}

// TestGoldenIsExact: the golden outputs are ExactScan's, to the bit.
func TestGoldenIsExact(t *testing.T) {
	man, err := Load(".")
	require.NoError(t, err)
	for _, c := range man.Cases {
		p, want, err := c.Problem(".")
		require.NoError(t, err)
		got, err := ExactScan(p)
		require.NoError(t, err, c.Name)
		for i := range want.Out {
			if math.Float64bits(got.Out[i]) != math.Float64bits(want.Out[i]) {
				t.Fatalf("%s: out[%d] = %.17g, the exact scan gives %.17g: regenerate (go test ./golden -update)", c.Name, i, want.Out[i], got.Out[i])
			}
		}
		for i := range want.LastState {
			if math.Float64bits(got.LastState[i]) != math.Float64bits(want.LastState[i]) {
				t.Fatalf("%s: last_state[%d] = %.17g, the exact scan gives %.17g", c.Name, i, want.LastState[i], got.LastState[i])
			}
		}
		if !c.Narrow() {
			continue
		}
		// out_rounded is the exact out rounded once to the case's type
		dt, err := c.Type()
		require.NoError(t, err)
		f := c.Files["out_rounded"]
		_, rounded, err := ReadNPYAs(f.File, f.Encoding)
		require.NoError(t, err, c.Name)
		for i := range want.Out {
			if r := dt.Round(want.Out[i]); math.Float64bits(r) != math.Float64bits(rounded[i]) {
				t.Fatalf("%s: out_rounded[%d] = %.17g, the exact out %.17g rounds to %.17g in %v", c.Name, i, rounded[i], want.Out[i], r, dt)
			}
		}
	}
}

// TestGoldenNarrowCases: the mixed-precision cases hold their inputs in
// their 16-bit type and their weights as float32 values; fp16's overflow
// case has outputs an exact kernel stores as ±Inf.
func TestGoldenNarrowCases(t *testing.T) {
	man, err := Load(".")
	require.NoError(t, err)
	narrow, overflow := 0, false
	for _, c := range man.Cases {
		if !c.Narrow() {
			continue
		}
		narrow++
		dt, err := c.Type()
		require.NoError(t, err)
		p, want, err := c.Problem(".")
		require.NoError(t, err)
		for _, in := range []string{"u", "delta"} {
			assert.Equal(t, EncodingOf(dt), c.Files[in].Encoding, "%s: %s", c.Name, in)
		}
		if c.HasGrads() {
			assert.Equal(t, EncodingOf(dt), c.Files["dout"].Encoding, "%s: dout is of the case's type", c.Name)
		}
		assert.Equal(t, EncFloat64, c.Files["A"].Encoding, "%s: A", c.Name)
		for _, v := range p.A {
			assert.Equal(t, v, float64(float32(v)), "%s: A holds float32 values", c.Name)
		}
		for _, v := range want.Out {
			if math.IsInf(dt.Round(v), 0) {
				overflow = true
			}
		}
	}
	assert.Equal(t, 15, narrow, "fp16 and bf16: six methods real, zoh complex; fp16's overflow")
	assert.True(t, overflow, "a case whose exact output rounds to ±Inf in fp16")
}

// TestGoldenInputsRegenerate: the inputs of every generated case are
// mamba1.Generate's for the manifest's spec and seed, to the bit: a change to the
// generators is a visible regeneration of the golden files.
func TestGoldenInputsRegenerate(t *testing.T) {
	man, err := Load(".")
	require.NoError(t, err)
	entries := map[string]Entry{}
	for _, e := range Entries() {
		entries[e.Name] = e
	}
	for _, c := range man.Cases {
		p, _, err := c.Problem(".")
		require.NoError(t, err)
		q, _ := entries[c.Name].problem()
		for name, pair := range map[string][2][]float64{"u": {p.U, q.U}, "delta": {p.Delta, q.Delta}, "A": {p.A, q.A}, "B": {p.B, q.B},
			"C": {p.C, q.C}, "D": {p.D, q.D}, "z": {p.Z, q.Z}, "delta_bias": {p.DeltaBias, q.DeltaBias}} {
			if len(pair[0]) != len(pair[1]) {
				t.Errorf("%s: %s has %d elements, the generator gives %d", c.Name, name, len(pair[0]), len(pair[1]))
				continue
			}
			for i := range pair[0] {
				if math.Float64bits(pair[0][i]) != math.Float64bits(pair[1][i]) {
					t.Errorf("%s: %s[%d] = %.17g, the generator gives %.17g: regenerate (go test ./golden -update)", c.Name, name, i, pair[0][i], pair[1][i])
					break
				}
			}
		}
	}
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if strings.HasSuffix(rel, ".go") {
			return nil
		}
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
}

// A missing or altered file is a clear error naming the file and the
// checksum the manifest expects.
func TestGoldenDetectsTampering(t *testing.T) {
	man, err := Load(".")
	require.NoError(t, err)
	f := man.Cases[3].Files["out"]

	dir := t.TempDir()
	copyDir(t, ".", dir)
	path := filepath.Join(dir, f.File)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[len(b)-1] ^= 1 // one bit of the last value
	require.NoError(t, os.WriteFile(path, b, 0o644))
	_, err = Load(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), f.File)
	assert.Contains(t, err.Error(), "manifest expects "+f.SHA256)
	assert.Contains(t, err.Error(), "altered")

	require.NoError(t, os.Remove(path))
	_, err = Load(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), f.File+" is missing (manifest expects sha256 "+f.SHA256+")")

	_, err = Load(t.TempDir())
	assert.ErrorContains(t, err, "go test ./golden -update")
}

// The golden folder stays small (the bound: a few MB).
func TestGoldenSize(t *testing.T) {
	var total int64
	require.NoError(t, filepath.Walk("cases", func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			total += info.Size()
		}
		return err
	}))
	t.Logf("golden/cases: %d bytes", total)
	assert.Less(t, total, int64(3<<20))
}

func TestNPYFormat(t *testing.T) {
	b, err := EncodeNPY([]int{3}, []float64{1, -2.5, math.Inf(1)})
	require.NoError(t, err)
	assert.Equal(t, "\x93NUMPY\x01\x00", string(b[:8]))
	hl := int(b[8]) | int(b[9])<<8
	assert.Zero(t, (10+hl)%64, "the data starts on a 64-byte boundary")
	assert.Contains(t, string(b[10:10+hl]), "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }")
	assert.Equal(t, byte('\n'), b[10+hl-1])
	shape, data, err := DecodeNPY(b)
	require.NoError(t, err)
	assert.Equal(t, []int{3}, shape)
	assert.Equal(t, []float64{1, -2.5, math.Inf(1)}, data)

	b, err = EncodeNPY([]int{2, 3, 2}, make([]float64, 12))
	require.NoError(t, err)
	shape, _, err = DecodeNPY(b)
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3, 2}, shape)

	_, err = EncodeNPY([]int{2, 2}, []float64{1})
	assert.ErrorContains(t, err, "holds 4 values, data has 1")
	_, _, err = DecodeNPY([]byte("not numpy"))
	assert.ErrorContains(t, err, "not a version 1.0 .npy file")
	bad := append([]byte(nil), b...)
	copy(bad[10:], []byte("{'descr': '<f4'"))
	_, _, err = DecodeNPY(bad)
	assert.ErrorContains(t, err, "not '<f8'")
	_, _, err = DecodeNPY(b[:len(b)-8])
	assert.ErrorContains(t, err, "needs 96 bytes")

	// the 16-bit encodings: '<f2' and bfloat16 bit patterns in '<u2'
	for _, enc := range []string{EncFloat16, EncBFloat16} {
		v := []float64{1, -2.5, 0.25, math.Inf(-1)}
		b, err := EncodeNPYAs([]int{4}, v, enc)
		require.NoError(t, err)
		assert.Len(t, b, 128+2*4, enc) // the header padded to 128 bytes, 2 bytes a value
		_, got, err := DecodeNPYAs(b, enc)
		require.NoError(t, err)
		assert.Equal(t, v, got, enc)
		_, err = EncodeNPYAs([]int{1}, []float64{0.1}, enc)
		assert.ErrorContains(t, err, "is not a "+enc+" value")
		_, _, err = DecodeNPY(b)
		assert.ErrorContains(t, err, "not '<f8'")
	}
	_, err = EncodeNPYAs([]int{1}, []float64{1}, "float8")
	assert.ErrorContains(t, err, `unknown encoding "float8"`)
}

// numpyPython finds a python3 that imports NumPy; "" if none. CI sets
// SSMK_REQUIRE_NUMPY=1 (it installs python3-numpy), where a missing NumPy
// fails instead of skipping.
func numpyPython(t *testing.T) string {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import numpy").Run() == nil {
			return py
		}
	}
	if os.Getenv("SSMK_REQUIRE_NUMPY") != "" {
		t.Fatal("SSMK_REQUIRE_NUMPY is set but no python3 imports numpy (Debian: apt-get install python3-numpy)")
	}
	t.Skip("no python3 with NumPy (Debian: apt-get install python3-numpy)")
	return ""
}

// TestNumPyRecomputes: check_numpy.py loads every case and its own NumPy
// scan agrees with the golden outputs; on a copy whose one output is off by
// 10⁻⁹ relative (its checksum updated, so only the recomputation can tell)
// it fails and names the case.
func TestNumPyRecomputes(t *testing.T) {
	py := numpyPython(t)
	out, err := exec.Command(py, "check_numpy.py", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("check_numpy.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)

	dir := t.TempDir()
	copyDir(t, ".", dir)
	man, err := Load(dir)
	require.NoError(t, err)
	c := man.Cases[4]
	f := c.Files["out"]
	_, want, err := c.Problem(dir)
	require.NoError(t, err)
	want.Out[3] *= 1 + 1e-9
	b, err := EncodeNPY(f.Shape, want.Out)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, f.File), b, 0o644))
	f.SHA256 = sum(b)
	man.Cases[4].Files["out"] = f
	js, err := json.MarshalIndent(man, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), js, 0o644))
	out, err = exec.Command(py, "check_numpy.py", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), c.Name) {
		t.Fatalf("an output off by 1e-9 passed check_numpy.py (err %v):\n%s", err, out)
	}
}

// TestGoldenGradientsExact: the golden gradients are ExactGrad's to the
// bit, and the float64 reference's adjoint (mamba1.ScanGrad) reproduces
// them within the backward's error model: a slip in the reference's
// adjoint fails here, against a derivation that shares no code with it.
func TestGoldenGradientsExact(t *testing.T) {
	man, err := Load(".")
	require.NoError(t, err)
	n, doutOnly := 0, 0
	for _, c := range man.Cases {
		if !c.HasGrads() {
			continue
		}
		n++
		if _, ok := c.Files["dlast_state"]; !ok {
			doutOnly++
		}
		p, _, err := c.Problem(".")
		require.NoError(t, err)
		ct, want, err := c.Grads(".")
		require.NoError(t, err)
		exact, err := ExactGrad(p, ct, false)
		require.NoError(t, err)
		require.Equal(t, exact, want, "%s: the files are not ExactGrad's: regenerate (go test ./golden -update)", c.Name)
		got, err := mamba1.ScanGrad(p, ct, false)
		require.NoError(t, err)
		sc, err := mamba1.GradErrorScale(p, ct, false, ssm.Float64)
		require.NoError(t, err)
		if cmp := judge.CompareGrads(p, got, ssm.F64, want, sc); !cmp.Passed(ssm.F64) {
			t.Errorf("%s: the reference's gradients are off the exact adjoint: worst %s", c.Name, cmp.Worst())
		}
	}
	require.Equal(t, 62, n, "every method × real/complex × feature set holds its backward pass, the Mamba block again with dout alone, and the 14 Mamba-block cases of fp16 and bf16")
	require.Equal(t, 26, doutOnly, "every method × real/complex has a case with dout alone (no dlast_state), and so has every 16-bit Mamba block")
}
