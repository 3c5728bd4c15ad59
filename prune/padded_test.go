package prune

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// TestPaddedFunctionUnchanged: a per-layer child made uniform by zero
// padding computes exactly what the unpadded per-layer child computes, block
// by block (attention with GQA and qk-norm, gated MLP), and a sub-block
// removed by the plan outputs zero. The unpadded reference is the test's own
// slicing of the parent (refChild); the forward passes are written here.
func TestPaddedFunctionUnchanged(t *testing.T) {
	plan := Plan{Version: 1, OutputFormat: FormatPadded, Layers: []LayerPlan{
		{Layer: 0, Neurons: seqFrom(0, 40)},
		{Layer: 1, KVHeads: ints(0, 2), Heads: ints(0, 1, 4, 5), Neurons: seqFrom(20, 20)},
		{Layer: 2, Heads: ints(1, 3, 5, 7), RemoveMLP: true},
		{Layer: 3, RemoveAttention: true},
	}}
	for _, s := range []synth{synths()[0], synths()[3]} {
		t.Run(s.name, func(t *testing.T) {
			dir, parent := writeSynth(t, s)
			out, res := runPrune(t, dir, &plan, "vllm")
			child, err := architecture.Load(out)
			must(t, err)
			if child.Arch != parent.Arch || !child.Uniform() {
				t.Fatalf("padded child is %s, uniform %v", child.Arch, child.Uniform())
			}
			a := child.Layers[0].Attention
			if a.Heads != 8 || a.KVHeads != 4 || child.Layers[0].MLP.Width != 48 {
				t.Fatalf("padded shape: %d heads, %d kv, width %d", a.Heads, a.KVHeads, child.Layers[0].MLP.Width)
			}
			pv, ps := readAll(t, dir)
			cv, _ := readAll(t, out)
			// Reference: the plan without padding or sub-block removal.
			refPlan := plan
			refPlan.Layers = append([]LayerPlan(nil), plan.Layers...)
			refPlan.Layers[2].RemoveMLP = false
			refPlan.Layers[3].RemoveAttention = false
			ref := refChild(t, parent, &refPlan, pv, ps)
			r := rand.New(rand.NewPCG(5, 6))
			const T = 3
			h := parent.Hidden
			x := make([]float32, T*h)
			for i := range x {
				x[i] = r.Float32()*2 - 1
			}
			pa := parent.Layers[0].Attention
			for l := range 4 {
				p := fmt.Sprintf("model.layers.%d.", l)
				lp := plan.Layers[l]
				// Attention.
				got := attention(cv, p, x, T, h, 8, 4, pa.HeadDim, pa.QKNorm)
				if lp.RemoveAttention {
					if !allZero(got) {
						t.Errorf("layer %d: removed attention (zero-padded) outputs non-zero", l)
					}
				} else {
					nh, nkv := 8, 4
					if lp.Heads != nil {
						nh = len(lp.Heads)
					}
					if lp.KVHeads != nil {
						nkv = len(lp.KVHeads)
					}
					want := attention(ref, p, x, T, h, nh, nkv, pa.HeadDim, pa.QKNorm)
					if d := maxDiff(got, want); d > 1e-5 || allZero(want) {
						t.Errorf("layer %d attention: padded differs from unpadded by %g", l, d)
					}
				}
				got = mlp(cv, p, x, T, h, 48)
				if lp.RemoveMLP {
					if !allZero(got) {
						t.Errorf("layer %d: removed MLP (zero-padded) outputs non-zero", l)
					}
				} else {
					w := 48
					if lp.Neurons != nil {
						w = len(lp.Neurons)
					}
					want := mlp(ref, p, x, T, h, w)
					if d := maxDiff(got, want); d > 1e-5 || allZero(want) {
						t.Errorf("layer %d MLP: padded differs from unpadded by %g", l, d)
					}
				}
			}
			_ = res
		})
	}
}

// matvec computes y[o] = Σ_i W[o][i]·x[i] for W of [out, in].
func matvec(w []float32, x []float32, out, in int) []float32 {
	y := make([]float32, out)
	for o := 0; o < out; o++ {
		var s float32
		for i := 0; i < in; i++ {
			s += w[o*in+i] * x[i]
		}
		y[o] = s
	}
	return y
}

// attention is causal grouped-query attention without RoPE (RoPE acts the
// same on both sides of the comparison) over T tokens of width h.
func attention(w map[string][]float32, p string, x []float32, T, h, heads, kv, hd int, qkNorm bool) []float32 {
	q := make([][]float32, T)
	k := make([][]float32, T)
	v := make([][]float32, T)
	for t := 0; t < T; t++ {
		xt := x[t*h : (t+1)*h]
		q[t] = matvec(w[p+"self_attn.q_proj.weight"], xt, heads*hd, h)
		k[t] = matvec(w[p+"self_attn.k_proj.weight"], xt, kv*hd, h)
		v[t] = matvec(w[p+"self_attn.v_proj.weight"], xt, kv*hd, h)
		if b := w[p+"self_attn.q_proj.bias"]; b != nil {
			addTo(q[t], b)
			addTo(k[t], w[p+"self_attn.k_proj.bias"])
			addTo(v[t], w[p+"self_attn.v_proj.bias"])
		}
		if qkNorm {
			headNorm(q[t], w[p+"self_attn.q_norm.weight"], hd)
			headNorm(k[t], w[p+"self_attn.k_norm.weight"], hd)
		}
	}
	out := make([]float32, 0, T*h)
	per := heads / kv
	for t := 0; t < T; t++ {
		o := make([]float32, heads*hd)
		for hh := 0; hh < heads; hh++ {
			g := hh / per
			scores := make([]float64, t+1)
			mx := math.Inf(-1)
			for s := 0; s <= t; s++ {
				var d float64
				for j := 0; j < hd; j++ {
					d += float64(q[t][hh*hd+j]) * float64(k[s][g*hd+j])
				}
				scores[s] = d / math.Sqrt(float64(hd))
				mx = math.Max(mx, scores[s])
			}
			var z float64
			for s := range scores {
				scores[s] = math.Exp(scores[s] - mx)
				z += scores[s]
			}
			for s := 0; s <= t; s++ {
				for j := 0; j < hd; j++ {
					o[hh*hd+j] += float32(scores[s] / z * float64(v[s][g*hd+j]))
				}
			}
		}
		out = append(out, matvec(w[p+"self_attn.o_proj.weight"], o, h, heads*hd)...)
	}
	return out
}

func headNorm(x, w []float32, hd int) {
	for h := 0; h < len(x)/hd; h++ {
		seg := x[h*hd : (h+1)*hd]
		var ss float64
		for _, v := range seg {
			ss += float64(v) * float64(v)
		}
		r := float32(1 / math.Sqrt(ss/float64(hd)+1e-6))
		for j := range seg {
			seg[j] *= r * w[j]
		}
	}
}

// mlp is the gated SiLU MLP: down(silu(gate·x) ⊙ up·x).
func mlp(w map[string][]float32, p string, x []float32, T, h, width int) []float32 {
	var out []float32
	for t := 0; t < T; t++ {
		xt := x[t*h : (t+1)*h]
		g := matvec(w[p+"mlp.gate_proj.weight"], xt, width, h)
		u := matvec(w[p+"mlp.up_proj.weight"], xt, width, h)
		for i := range g {
			g[i] = g[i] / (1 + float32(math.Exp(float64(-g[i])))) * u[i]
		}
		out = append(out, matvec(w[p+"mlp.down_proj.weight"], g, h, width)...)
	}
	return out
}

func addTo(a, b []float32) {
	for i := range a {
		a[i] += b[i]
	}
}

func allZero(a []float32) bool {
	for _, v := range a {
		if v != 0 {
			return false
		}
	}
	return true
}

func maxDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestPaddedNemotronH: per-layer MLP widths and attention heads of a hybrid
// are zero-padded (non-gated relu² MLP, GQA attention); Mamba heads stay
// uniform. Padded blocks compute what the unpadded ones do.
func TestPaddedNemotronH(t *testing.T) {
	cfg := nemotronHCfg()
	cfg["hybrid_override_pattern"] = "M*M-*-" // MLP width 40, 4 heads / 2 KV
	s := synth{name: "nemotron-h2", cfg: cfg, dtype: checkpoint.BF16}
	plan := Plan{Version: 1, OutputFormat: FormatPadded, Layers: []LayerPlan{
		{Layer: 0, MambaHeads: ints(0, 1, 4, 5)},
		{Layer: 1, KVHeads: ints(1), Heads: ints(2)},
		{Layer: 2, MambaHeads: ints(2, 3, 6, 7)},
		{Layer: 3, Neurons: seqFrom(5, 12)},
		{Layer: 4, Heads: ints(0, 3)},
		{Layer: 5, Neurons: seqFrom(0, 30)},
	}}
	dir, parent := writeSynth(t, s)
	out, _ := runPrune(t, dir, &plan, "vllm")
	child, err := architecture.Load(out)
	must(t, err)
	if w := child.Layers[3].MLP.Width; w != 30 || child.Layers[1].Attention.Heads != 2 || child.Layers[1].Attention.KVHeads != 2 || child.Layers[0].Mamba.Heads != 4 {
		t.Fatalf("padded hybrid: width %d, attention %+v, mamba %+v", w, child.Layers[1].Attention, child.Layers[0].Mamba)
	}
	pv, ps := readAll(t, dir)
	cv, _ := readAll(t, out)
	ref := refChild(t, parent, &plan, pv, ps)
	r := rand.New(rand.NewPCG(7, 8))
	const T = 3
	h := parent.Hidden
	x := make([]float32, T*h)
	for i := range x {
		x[i] = r.Float32()*2 - 1
	}
	rename := func(w map[string][]float32, layer int) map[string][]float32 {
		out := map[string][]float32{}
		p := fmt.Sprintf("backbone.layers.%d.mixer.", layer)
		for k, v := range w {
			if len(k) > len(p) && k[:len(p)] == p {
				out[fmt.Sprintf("model.layers.%d.self_attn.", layer)+k[len(p):]] = v
				out[fmt.Sprintf("model.layers.%d.mlp.", layer)+k[len(p):]] = v
			}
		}
		return out
	}
	for _, c := range []struct{ layer, heads, kv int }{{1, 1, 1}, {4, 2, 2}} {
		p := fmt.Sprintf("model.layers.%d.", c.layer)
		got := attention(rename(cv, c.layer), p, x, T, h, 2, 2, 8, false)
		want := attention(rename(ref, c.layer), p, x, T, h, c.heads, c.kv, 8, false)
		if d := maxDiff(got, want); d > 1e-5 || allZero(want) {
			t.Errorf("layer %d attention: padded differs by %g", c.layer, d)
		}
	}
	for _, c := range []struct{ layer, width int }{{3, 12}, {5, 30}} {
		got := relu2MLP(rename(cv, c.layer), fmt.Sprintf("model.layers.%d.", c.layer), x, T, h, 30)
		want := relu2MLP(rename(ref, c.layer), fmt.Sprintf("model.layers.%d.", c.layer), x, T, h, c.width)
		if d := maxDiff(got, want); d > 1e-5 || allZero(want) {
			t.Errorf("layer %d MLP: padded differs by %g", c.layer, d)
		}
	}
	// Per-layer Mamba heads cannot be padded.
	plan.Layers[2].MambaHeads = ints(0, 4)
	plan.Layers = plan.Layers[:3]
	err = pruneErr(t, dir, &plan)
	if !strings.Contains(err.Error(), "mamba_heads") || !strings.Contains(err.Error(), "grouped RMSNorm") {
		t.Errorf("per-layer Mamba heads: %v", err)
	}
}

// relu2MLP is Nemotron-H's MLP: down(relu(up·x)²).
func relu2MLP(w map[string][]float32, p string, x []float32, T, h, width int) []float32 {
	var out []float32
	for t := 0; t < T; t++ {
		u := matvec(w[p+"mlp.up_proj.weight"], x[t*h:(t+1)*h], width, h)
		for i := range u {
			u[i] = max(u[i], 0)
			u[i] *= u[i]
		}
		out = append(out, matvec(w[p+"mlp.down_proj.weight"], u, h, width)...)
	}
	return out
}
