package ssm

import "fmt"

// Channels is channels checked against a head of P channels (nil: all P,
// in order), for the cuts of a problem to some of its heads' channels
// (mamba2's and mamba3's ChannelsOf); it panics, naming pkg, on a channel
// outside [0, P).
func Channels(pkg string, P int, channels []int) []int {
	if channels == nil {
		channels = make([]int, P)
		for c := range channels {
			channels[c] = c
		}
	}
	for _, c := range channels {
		if c < 0 || c >= P {
			panic(fmt.Sprintf("%s: ChannelsOf: channel %d: want one of a head's %d", pkg, c, P))
		}
	}
	return channels
}

// AppendRows appends to dst the rows idx of src, each of width elements,
// the first at base (src[base+c·width : base+(c+1)·width] for c in idx):
// the cuts of a problem to some channels of its heads (width 1 for a
// channel's element, N for its row of the state).
func AppendRows(dst, src []float64, base, width int, idx []int) []float64 {
	for _, c := range idx {
		dst = append(dst, src[base+c*width:base+(c+1)*width]...)
	}
	return dst
}
