package golden

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/ssm"
)

// TestMamba3GoldenReferenceReproduces: package mamba3's float64 reference
// against the golden outputs of the 256-bit evaluation, within its error
// model in float64 (judge's threshold).
func TestMamba3GoldenReferenceReproduces(t *testing.T) {
	man, err := LoadMamba3(".")
	require.NoError(t, err)
	require.Len(t, man.Cases, len(Mamba3Entries()), "the manifest lists every Mamba-3 case")
	for _, c := range man.Cases {
		p := c.Problem()
		p.DType, p.Arithmetic = ssm.F64, mamba3.Arithmetic{U: 0x1p-53}
		wy, wst, err := c.Outputs(".")
		require.NoError(t, err)
		y, st := mamba3.Forward(p)
		cmp, _, err := judge.CompareArrays(judge.Mamba3Arrays(p, y, wy, st, wst, mamba3.ErrorScale(p)))
		require.NoError(t, err)
		if cmp.NonFinite > 0 || cmp.Worst.Ratio > judge.Threshold(ssm.F64) {
			t.Errorf("%s: the reference is off the exact evaluation: %s", c.Name, cmp.Worst)
		}
	}
}

// TestMamba3GoldenIsExact: the files are ExactMamba3's, to the bit, and the
// generator still draws their inputs.
func TestMamba3GoldenIsExact(t *testing.T) {
	man, err := LoadMamba3(".")
	require.NoError(t, err)
	for _, c := range man.Cases {
		p := c.Problem()
		wy, wst, err := c.Outputs(".")
		require.NoError(t, err)
		y, st := ExactMamba3(p)
		require.Equal(t, y, wy, "%s: y is not ExactMamba3's: regenerate (go test ./golden -update)", c.Name)
		require.Equal(t, st, wst, "%s: the states are not ExactMamba3's", c.Name)
		_, q, err := ReadNPY(filepath.Join("mamba3", c.Files["Q"].File))
		require.NoError(t, err)
		require.Equal(t, p.Q, q, "%s: Q is not the generator's", c.Name)
	}
}

// TestMamba3NumPyRecomputes: check_numpy_mamba3.py recomputes every case
// with its own NumPy loop and agrees; an output off by 1e-9 relative (its
// checksum updated) fails it, named.
func TestMamba3NumPyRecomputes(t *testing.T) {
	py := numpyPython(t)
	out, err := exec.Command(py, "check_numpy_mamba3.py", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("check_numpy_mamba3.py: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	dir := t.TempDir()
	copyDir(t, ".", dir)
	man, err := LoadMamba3(dir)
	require.NoError(t, err)
	c := man.Cases[1]
	f := c.Files["y"]
	y, _, err := c.Outputs(dir)
	require.NoError(t, err)
	y[5] *= 1 + 1e-9
	b, err := EncodeNPY(f.Shape, y)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mamba3", f.File), b, 0o644))
	f.SHA256 = sum(b)
	man.Cases[1].Files["y"] = f
	js, err := json.MarshalIndent(man, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mamba3", "manifest.json"), js, 0o644))
	out, err = exec.Command(py, "check_numpy_mamba3.py", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), c.Name) {
		t.Fatalf("an output off by 1e-9 passed check_numpy_mamba3.py (err %v):\n%s", err, out)
	}
}
