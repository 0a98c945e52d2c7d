package fuzz

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// A long FuzzScan input (Batch ≥ 128) is the short problem of the same
// bytes with its time series repeated: LongSteps more steps, every
// time-dependent array periodic in the short seqlen, the rest unchanged.
func TestDecodeScanLong(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := ScanShape{
			Method: rapid.Uint8().Draw(t, "method"), DType: rapid.Uint8().Draw(t, "dtype"),
			Flags: rapid.Uint8().Draw(t, "flags"), Batch: rapid.Uint8Max(127).Draw(t, "batch"),
			Dim: rapid.Uint8().Draw(t, "dim"), Seqlen: rapid.Uint8().Draw(t, "seqlen"),
			Dstate: rapid.Uint8Max(127).Draw(t, "dstate"), Groups: rapid.Uint8().Draw(t, "groups"),
		}
		data := rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(t, "data")
		short, dt, withState := DecodeScan(s, data, 256)
		long := s
		long.Batch |= 128
		p, dtLong, withStateLong := DecodeScan(long, data, 256)
		require.NoError(t, p.Validate())
		assert.Equal(t, dt, dtLong)
		assert.Equal(t, withState, withStateLong)
		L := short.Seqlen
		require.Equal(t, LongSteps+L, p.Seqlen)
		w := 1
		if p.Complex {
			w = 2
		}
		same := func(x, y float64) bool { return x == y || (x != x && y != y) } // NaN is NaN's copy
		periodic := func(name string, x, y []float64, width int) {
			if x == nil {
				assert.Nil(t, y, name)
				return
			}
			rows := len(x) / (L * width)
			require.Len(t, y, rows*p.Seqlen*width, name)
			for r := 0; r < rows; r++ {
				for tt := 0; tt < p.Seqlen; tt++ {
					for k := 0; k < width; k++ {
						want := x[(r*L+tt%L)*width+k]
						got := y[(r*p.Seqlen+tt)*width+k]
						if !same(got, want) {
							t.Fatalf("%s[row %d, t %d, part %d] = %v, want %v (t mod %d)", name, r, tt, k, got, want, L)
						}
					}
				}
			}
		}
		periodic("U", short.U, p.U, 1)
		periodic("Delta", short.Delta, p.Delta, 1)
		periodic("Z", short.Z, p.Z, 1)
		if p.VariableB {
			periodic("B", short.B, p.B, w)
		} else {
			assert.Equal(t, len(short.B), len(p.B))
		}
		if p.VariableC {
			periodic("C", short.C, p.C, w)
		} else {
			assert.Equal(t, len(short.C), len(p.C))
		}
		for name, xy := range map[string][2][]float64{"A": {short.A, p.A}, "D": {short.D, p.D}, "DeltaBias": {short.DeltaBias, p.DeltaBias}} {
			require.Len(t, xy[1], len(xy[0]), name)
			for i := range xy[0] {
				if !same(xy[1][i], xy[0][i]) {
					t.Fatalf("%s[%d] = %v, want %v", name, i, xy[1][i], xy[0][i])
				}
			}
		}
		assert.Equal(t, short.Batch, p.Batch)
	})
}
