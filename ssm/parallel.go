package ssm

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
)

// ParallelGrain is the block of elements ParallelBlocks hands one
// goroutine at a time: large enough that scheduling costs nothing beside
// the work, small enough that the last blocks do not leave cores idle.
const ParallelGrain = 1 << 20

// ParallelBlocks calls f on consecutive blocks [lo, hi) of ParallelGrain
// elements covering [0, n), spread over GOMAXPROCS goroutines where there
// is more than one block, else once on the caller's goroutine. It is for
// the elementwise passes over the deployment sizes' arrays (billions of
// elements: rounding, encoding, decoding), which take minutes on one core;
// f must write only its own block, so the result never depends on the
// schedule.
func ParallelBlocks(n int, f func(lo, hi int)) {
	blocks := (n + ParallelGrain - 1) / ParallelGrain
	if blocks < 2 {
		if n > 0 {
			f(0, n)
		}
		return
	}
	ParallelFor(blocks, func(b int) { f(b*ParallelGrain, min((b+1)*ParallelGrain, n)) })
}

// ParallelFor calls f(i) for every i in [0, n), each once, on up to
// GOMAXPROCS goroutines taking the next i as they finish (in order on the
// caller's goroutine where there is one core or one i). f must write only
// what is its i's.
func ParallelFor(n int, f func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers < 2 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// BigArray is the size from which Normals draws in parallel blocks: 2²⁴
// elements, past every generated problem but the deployment sizes'.
const BigArray = 1 << 24

// Normals returns n standard normal draws of rng. Below BigArray they are
// rng's next n draws; an array of BigArray or more (the deployment sizes':
// billions of elements, minutes on one core) is drawn in parallel blocks,
// each from a stream of its own keyed by one draw of rng, so the same rng
// state still gives the same array.
func Normals(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	if n < BigArray {
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	key := rng.Uint64()
	ParallelBlocks(n, func(lo, hi int) {
		r := rand.New(rand.NewPCG(key, uint64(lo)))
		for i := lo; i < hi; i++ {
			v[i] = r.NormFloat64()
		}
	})
	return v
}
