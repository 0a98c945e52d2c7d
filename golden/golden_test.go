package golden

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ssmverify/judge"
	"ssmverify/reference"
	"ssmverify/ssm"
)

var update = flag.Bool("update", false, "regenerate golden/ from gen.New and the reference")

func TestMain(m *testing.M) {
	flag.Parse()
	if *update {
		man, err := Generate(".")
		if err != nil {
			panic(err)
		}
		println("golden: wrote", len(man.Cases), "cases")
	}
	os.Exit(m.Run())
}

// The reference reproduces every golden output to ≤ 1 ulp: a change to the
// reference must be a deliberate regeneration, visible in review.
func TestGoldenReferenceReproduces(t *testing.T) {
	man, err := Load(".")
	require.NoError(t, err)
	require.Len(t, man.Cases, len(Entries()), "the manifest lists every golden case")
	for _, c := range man.Cases {
		p, want, err := c.Problem(".")
		require.NoError(t, err)
		got, err := reference.Scan(p, ssm.Float64)
		require.NoError(t, err)
		for i := range want.Out {
			if u := judge.ULPs(got.Out[i], want.Out[i], ssm.F64); u > 1 {
				t.Errorf("%s: out[%d] = %.17g, golden %.17g (%.0f ulp)", c.Name, i, got.Out[i], want.Out[i], u)
			}
		}
		for i := range want.LastState {
			if u := judge.ULPs(got.LastState[i], want.LastState[i], ssm.F64); u > 1 {
				t.Errorf("%s: last_state[%d] = %.17g, golden %.17g (%.0f ulp)", c.Name, i, got.LastState[i], want.LastState[i], u)
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
}
