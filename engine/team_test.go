package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/autocompress/autocompress/engine/blas"
)

// TestDecodeBitExactAcrossThreads checks that decoding steps give bit for
// bit the same logits on one thread and on two (the blas team splits the
// columns of every decode product, which keeps each dot product whole),
// for the parent's shape with and without attention, at several batch
// sizes, and for a step that mixes a prompt chunk with decoding rows.
func TestDecodeBitExactAcrossThreads(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs to run the two-thread path")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	// The Go backend, also in -tags openblas builds: there, products of
	// more than four rows go to OpenBLAS in row or column blocks whose
	// edges it computes with other kernels, so its results depend on the
	// thread count with or without the team.
	defer blas.ForceGo(blas.ForceGo(true))
	defer blas.SetTeam(blas.SetTeam(true))
	runs0, _ := blas.TeamStats()
	for _, c := range []struct {
		name string
		attn func(int) bool
	}{{"parent", func(int) bool { return true }}, {"noattn6", func(l int) bool { return l >= 6 }}} {
		for _, conc := range []int{1, 3, 4, 8} {
			t.Run(fmt.Sprintf("%s/conc%d", c.name, conc), func(t *testing.T) {
				var got [2][][]float32
				for ti, threads := range []int{1, 2} {
					runtime.GOMAXPROCS(threads)
					got[ti] = decodeLogits(t, c.attn, conc)
				}
				for s := range got[0] {
					for i := range got[0][s] {
						if math.Float32bits(got[0][s][i]) != math.Float32bits(got[1][s][i]) {
							t.Fatalf("step %d, logit %d: %v on 1 thread, %v on 2", s, i, got[0][s][i], got[1][s][i])
						}
					}
				}
			})
		}
	}
	if runs, _ := blas.TeamStats(); runs == runs0 {
		t.Error("no product ran on the blas team: the two-thread runs were serial and the comparison is vacuous")
	}
}

// decodeLogits runs, from the same weights and prompts, a mixed step (the
// first sequence's prompt with the others decoding) and then four decoding
// steps of conc sequences, and returns every step's logits, copied.
func decodeLogits(t *testing.T, attn func(int) bool, conc int) [][]float32 {
	m, err := New(parentShapedArch(attn), 1)
	if err != nil {
		t.Fatal(err)
	}
	m.SetInference(true)
	r := rand.New(rand.NewPCG(3, uint64(conc)))
	caches := make([]*Cache, conc)
	for i := range caches {
		caches[i] = m.NewCache(256)
		if i == 0 {
			continue
		}
		if _, err := m.Step(caches[i:i+1], [][]int32{randTokens(r, 40+7*i, 4096)}, false); err != nil {
			t.Fatal(err)
		}
	}
	var out [][]float32
	toks := make([][]int32, conc)
	for step := range 5 {
		for i := range toks {
			toks[i] = []int32{int32(r.IntN(4096))}
		}
		if step == 0 {
			toks[0] = randTokens(r, 33, 4096) // a prompt chunk among decoding rows
		}
		logits, err := m.Step(caches, toks, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range logits {
			out = append(out, append([]float32(nil), l...))
		}
	}
	return out
}
