package search

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/autocompress/autocompress/estimate"
)

// TestHullArgmaxIsLinearScan: the bisection of hullArgmax picks what a
// scan of every hull point for the first maximum of value − λ·cost picks,
// on the menus of the 70B and the enumerable spaces, for λ across the
// range the Lagrangian bisection visits.
func TestHullArgmaxIsLinearScan(t *testing.T) {
	s70 := setup70B(t)
	so := s70.space
	so.Engine, so.Concurrency, so.MaxMemory, so.DeviceBytes = s70.engine, s70.work.Concurrency, s70.b.MaxMemory, float64(gpu(t, s70.gpu).MemoryBytes)
	sp70, err := NewSpace(s70.parent, so)
	if err != nil {
		t.Fatal(err)
	}
	ss, spSmall := smallSpace(t)
	r := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for _, c := range []struct {
		s  setup
		sp *Space
	}{{s70, sp70}, {ss, spSmall}} {
		px, _ := NewProxy(c.s.parent, nil)
		e, err := newEvaluator(c.sp, &c.s.b, px, gpu(t, c.s.gpu), c.s.work, estimate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		gs := e.globals()
		var mc menuCache
		for range 12 {
			g, si := gs[r.IntN(len(gs))], r.IntN(len(c.sp.Settings))
			menus, hs := mc.get(e, g, si)
			var vs, cs float64
			for _, opts := range menus {
				vs += opts[0].value
				cs += opts[0].cost
			}
			for range 40 {
				// λ from 1e-8 to 1e4 times the parent's value per cost, log-uniform.
				lambda := vs / cs * math.Pow(10, -8+12*r.Float64())
				for l, opts := range menus {
					want, bs := 0, math.Inf(-1)
					for _, i := range hs.all[l] {
						if s := opts[i].value - lambda*opts[i].cost; s > bs {
							want, bs = i, s
						}
					}
					if got := hullArgmax(opts, hs.all[l], lambda); got != want {
						t.Fatalf("λ %g, layer %d: bisection picks option %d, the scan %d", lambda, l, got, want)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d layer choices agree", checked)
}
