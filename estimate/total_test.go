package estimate

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/workload"
)

// sameSummary compares every field of two Summaries (unexported ones too):
// integers exactly, floats within rel (0: bit for bit).
func sameSummary(t *testing.T, what string, got, want *Summary, rel float64) {
	t.Helper()
	var cmp func(path string, g, w reflect.Value)
	cmp = func(path string, g, w reflect.Value) {
		switch g.Kind() {
		case reflect.Struct:
			for i := range g.NumField() {
				cmp(path+"."+g.Type().Field(i).Name, g.Field(i), w.Field(i))
			}
		case reflect.Array:
			for i := range g.Len() {
				cmp(path, g.Index(i), w.Index(i))
			}
		case reflect.Float64:
			a, b := g.Float(), w.Float()
			if a != b && (rel == 0 || math.Abs(a-b) > rel*math.Abs(b)) {
				t.Errorf("%s: %s = %v, Assemble gives %v", what, path, a, b)
			}
		case reflect.Int, reflect.Int32:
			if g.Int() != w.Int() {
				t.Errorf("%s: %s = %d, Assemble gives %d", what, path, g.Int(), w.Int())
			}
		default:
			t.Fatalf("%s: field %s of kind %s not compared", what, path, g.Kind())
		}
	}
	cmp("Summary", reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem())
}

// menuOf is a per-layer menu over a Llama-like parent with sliding-window
// and Mamba layers: each slot's options differ in MLP width, KV heads, the
// attention or MLP sub-block, and removal (nil).
func menuOf(t *testing.T, c *Compiled, m *architecture.Model) [][]*LayerSum {
	t.Helper()
	out := make([][]*LayerSum, len(m.Layers))
	for i := range m.Layers {
		var opts []*LayerSum
		add := func(l architecture.Layer) {
			ls := c.LayerSum(&l, m.Hidden)
			opts = append(opts, &ls)
		}
		pl := m.Layers[i]
		add(pl.Clone())
		if pl.MLP != nil {
			for _, w := range []int{pl.MLP.Width / 2, pl.MLP.Width + 512} {
				l := pl.Clone()
				l.MLP.Width = w
				add(l)
			}
			l := pl.Clone()
			l.MLP = nil
			add(l)
		}
		if pl.Attention != nil {
			for _, kv := range []int{1, 2} {
				l := pl.Clone()
				l.Attention.KVHeads = kv
				add(l)
			}
			l := pl.Clone()
			l.Attention = nil
			add(l)
		}
		opts = append(opts, nil) // removed
		out[i] = opts
	}
	return out
}

// TestTotalMatchesAssemble: a Total's committed candidate assembles to
// Assemble's Summary bit for bit, and every one- or two-slot change to it
// within rounding, with counts and maxima exact, on random walks over a
// heterogeneous menu (full and sliding-window attention, Mamba, removed
// layers and sub-blocks), at TP 1 and 2, with and without MoE layers.
func TestTotalMatchesAssemble(t *testing.T) {
	m := llama("het", 12, 2048, 16, 4, 8192, 32000)
	m.Layers[3].Attention.SlidingWindow = 1024
	m.Layers[7].Attention.SlidingWindow = 4096
	m.Layers[5].Attention = nil
	m.Layers[5].Mamba = &architecture.Mamba{Heads: 32, HeadDim: 64, StateSize: 128, Groups: 4, ConvKernel: 4}
	moe := m.Clone()
	moe.Layers[4].MLP = nil
	moe.Layers[4].MoE = &architecture.MoE{Experts: 16, TopK: 2, ExpertWidth: 1024, Gated: true, SharedWidth: 2048}
	w := workload.FixedClosed(1024, 128, 8)
	for _, tc := range []struct {
		name string
		m    *architecture.Model
		tp   int
	}{{"dense TP1", m, 1}, {"dense TP2", m, 2}, {"MoE TP1", moe, 1}} {
		c, err := Compile(gpu(t, "h100-sxm"), VLLM, Options{Precision: "fp8", TP: tc.tp}, &w, nil)
		if err != nil {
			t.Fatal(err)
		}
		menus := menuOf(t, c, tc.m)
		r := rand.New(rand.NewPCG(1, uint64(tc.tp)))
		cur := make([]*LayerSum, len(menus))
		for i := range cur {
			cur[i] = menus[i][0]
		}
		present := func(ls []*LayerSum) []*LayerSum {
			var p []*LayerSum
			for _, x := range ls {
				if x != nil {
					p = append(p, x)
				}
			}
			return p
		}
		var tot Total
		var got, want Summary
		tot.Reset(cur)
		for step := range 400 {
			c.AssembleTotal(&got, tc.m, &tot)
			c.Assemble(&want, tc.m, present(cur))
			sameSummary(t, tc.name+" committed", &got, &want, 0)
			a, b := r.IntN(len(cur)), -1
			if step%2 == 1 {
				if b = r.IntN(len(cur)); b == a {
					b = -1
				}
			}
			next := append([]*LayerSum(nil), cur...)
			xa := menus[a][r.IntN(len(menus[a]))]
			next[a] = xa
			var xb *LayerSum
			if b >= 0 {
				xb = menus[b][r.IntN(len(menus[b]))]
				next[b] = xb
			}
			c.AssembleChange(&got, tc.m, &tot, a, xa, b, xb)
			c.Assemble(&want, tc.m, present(next))
			sameSummary(t, tc.name+" change", &got, &want, 1e-12)
			if pg, pw := c.PriceSummary(&got), c.PriceSummary(&want); pg.Fits != pw.Fits || math.Abs(pg.Latency.TPOT-pw.Latency.TPOT) > 1e-12*pw.Latency.TPOT {
				t.Errorf("%s: priced change %+v, Assemble %+v", tc.name, pg.Latency, pw.Latency)
			}
			if step%3 == 0 { // accept the change
				cur = next
				tot.Reset(cur)
			}
		}
		if n := testing.AllocsPerRun(50, func() { c.AssembleChange(&got, tc.m, &tot, 1, menus[1][1], 2, nil); c.PriceSummary(&got) }); n != 0 {
			t.Errorf("%s: AssembleChange+PriceSummary allocate %.0f times", tc.name, n)
		}
	}
}

// BenchmarkAssembleChange70B prices one-slot changes of an 80-layer
// candidate with AssembleChange, beside Assemble of the same candidates.
func BenchmarkAssembleChange70B(b *testing.B) {
	w := workload.FixedClosed(2048, 512, 32)
	c, err := Compile(gpu(b, "h100-sxm"), VLLM, Options{Precision: "fp8", TP: 2}, &w, nil)
	if err != nil {
		b.Fatal(err)
	}
	m := llama70B()
	menu := make([]LayerSum, 32)
	for k := range menu {
		l := m.Layers[0].Clone()
		l.MLP.Width = 28672 - 512*(k%16)
		if k >= 16 {
			l.Attention.KVHeads = 4
		}
		menu[k] = c.LayerSum(&l, m.Hidden)
	}
	cur := make([]*LayerSum, 80)
	for j := range cur {
		cur[j] = &menu[(j*3)%32]
	}
	var tot Total
	tot.Reset(cur)
	var s Summary
	for _, mode := range []string{"Assemble", "AssembleChange"} {
		b.Run(mode, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l, x := i%80, &menu[i%32]
				if mode == "Assemble" {
					old := cur[l]
					cur[l] = x
					c.Assemble(&s, m, cur)
					cur[l] = old
				} else {
					c.AssembleChange(&s, m, &tot, l, x, -1, nil)
				}
				c.PriceSummary(&s)
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "candidates/s")
		})
	}
}
