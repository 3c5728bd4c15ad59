package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// gptOssTestConfig is a small gpt-oss: a sliding layer (window 4) between
// full ones, sinks, q/k/v/o biases, YaRN whose ramp mixes interpolated and
// extrapolated frequencies, 6 stacked experts of width 12 (top-2) and a
// clamp (swiglu_limit 0.5) that the random weights reach.
const gptOssTestConfig = `{"architectures":["GptOssForCausalLM"],"model_type":"gpt_oss","hidden_size":32,
	"num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":64,
	"intermediate_size":12,"num_local_experts":6,"num_experts_per_tok":2,"sliding_window":4,
	"layer_types":["sliding_attention","full_attention","sliding_attention"],"attention_bias":true,"rms_norm_eps":1e-5,
	"rope_theta":100,"rope_scaling":{"rope_type":"yarn","factor":4.0,"beta_fast":32.0,"beta_slow":1.0,
	"truncate":false,"original_max_position_embeddings":64},"swiglu_alpha":1.702,"swiglu_limit":0.5,
	"hidden_act":"silu","tie_word_embeddings":false,"max_position_embeddings":256}`

// gptOssModel is a random model of gptOssTestConfig with every tensor
// (sinks and biases too) drawn at random.
func gptOssModel(t testing.TB, seed uint64) *Model {
	t.Helper()
	a, err := architecture.FromConfig([]byte(gptOssTestConfig))
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(a, seed)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 9))
	for _, s := range m.Specs() {
		v := m.Tensor(s.Name)
		for i := range v {
			switch {
			case s.isNorm():
				v[i] = float32(1 + 0.3*r.NormFloat64())
			case len(s.Shape) == 1 || s.kind == "expert_gate_up_bias" || s.kind == "expert_down_bias":
				v[i] = float32(0.3 * r.NormFloat64())
			default:
				v[i] = float32(0.08 * r.NormFloat64())
			}
		}
	}
	return m
}

func relDiff(a, b []float32) float64 {
	var d, n float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
		n = max(n, math.Abs(float64(b[i])))
	}
	return d / n
}

// TestGptOssCachedDecode: decoding token by token through the KV cache
// (sliding layers reading only their window of cached keys, sinks in every
// row) gives the full-sequence forward's logits, row by row, and a
// prefill-then-decode split gives them too.
func TestGptOssCachedDecode(t *testing.T) {
	m := gptOssModel(t, 3)
	const T = 19
	V := m.arch.Vocab
	tokens := moeTokens(T, V, 2)
	full, err := m.Forward(tokens, 1, T)
	if err != nil {
		t.Fatal(err)
	}
	full = slices.Clone(full)
	c := m.NewCache(T)
	var worst float64
	for i, id := range tokens {
		out, err := m.Step([]*Cache{c}, [][]int32{{id}}, false)
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, relDiff(out[0], full[i*V:(i+1)*V]))
	}
	t.Logf("token-by-token decode vs full forward: %.3g relative", worst)
	if worst > 1e-5 {
		t.Errorf("cached decode differs from the full forward by %.3g relative (want ≤ 1e-5)", worst)
	}
	c.Reset()
	if _, err := m.Step([]*Cache{c}, [][]int32{tokens[:7]}, false); err != nil {
		t.Fatal(err)
	}
	out, err := m.Step([]*Cache{c}, [][]int32{tokens[7:]}, true)
	if err != nil {
		t.Fatal(err)
	}
	if e := relDiff(out[0], full[7*V:]); e > 1e-5 {
		t.Errorf("prefill 7 then 12 differs from the full forward by %.3g relative", e)
	}
	// Two sequences in one step, at different lengths (as Serve batches
	// them): a prefill of 5 beside the 8th token of the first.
	other := moeTokens(11, V, 9)
	ref, err := m.Forward(other, 1, 11)
	if err != nil {
		t.Fatal(err)
	}
	ref = slices.Clone(ref)
	c.Reset()
	c2 := m.NewCache(T)
	if _, err := m.Step([]*Cache{c, c2}, [][]int32{tokens[:7], other[:6]}, false); err != nil {
		t.Fatal(err)
	}
	outs, err := m.Step([]*Cache{c, c2}, [][]int32{tokens[7:8], other[6:]}, false)
	if err != nil {
		t.Fatal(err)
	}
	if e := max(relDiff(outs[0], full[7*V:8*V]), relDiff(outs[1], ref[10*V:])); e > 1e-5 {
		t.Errorf("two sequences in one step differ from their full forwards by %.3g relative", e)
	}
}

// attnCapture records layer l's attention heads' output (SiteAttnHeads).
type attnCapture struct {
	layer int
	data  []float32
}

func (c *attnCapture) Observe(a *Activation) {
	if a.Site == SiteAttnHeads && a.Layer == c.layer {
		c.data = slices.Clone(a.Data)
	}
}

// TestGptOssSlidingWindow: a sliding layer's attention output at position
// t does not change when a token at t − window or before changes (bit for
// bit), and does when the token at t − window + 1 changes; the full layer
// after it sees the change everywhere after it.
func TestGptOssSlidingWindow(t *testing.T) {
	m := gptOssModel(t, 4)
	const T, W = 12, 4
	V := m.arch.Vocab
	qd := m.dims[0].qd
	if m.dims[0].window != W || m.dims[1].window != 0 {
		t.Fatalf("windows %d, %d: want %d, 0", m.dims[0].window, m.dims[1].window, W)
	}
	run := func(tokens []int32, layer int) []float32 {
		c := &attnCapture{layer: layer}
		m.SetObserver(c)
		defer m.SetObserver(nil)
		if _, err := m.Forward(tokens, 1, T); err != nil {
			t.Fatal(err)
		}
		return c.data
	}
	base := moeTokens(T, V, 5)
	const changed = 3
	alt := slices.Clone(base)
	alt[changed] = (alt[changed] + 11) % int32(V)
	for _, layer := range []int{0, 1} {
		a, b := run(base, layer), run(alt, layer)
		for p := range T {
			same := slices.Equal(a[p*qd:(p+1)*qd], b[p*qd:(p+1)*qd])
			var want bool
			switch {
			case p < changed:
				want = true // causal
			case layer == 0:
				want = p-changed >= W // outside the window
			default:
				want = false // full attention (and layer 0's change below it)
			}
			if same != want {
				t.Errorf("layer %d position %d (token %d changed, window %d): unchanged = %v, want %v", layer, p, changed, W, same, want)
			}
		}
	}
}

// TestGptOssCheckTrain: gpt-oss runs forward (Check accepts it) and
// CheckTrain refuses it, pointing at the reference trainer; the backward
// passes return ErrGptOssBackward.
func TestGptOssCheckTrain(t *testing.T) {
	m := gptOssModel(t, 1)
	if err := Check(m.arch); err != nil {
		t.Fatalf("Check(gpt-oss) = %v, want nil", err)
	}
	err := CheckTrain(m.arch)
	var ue *UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "gpt-oss") || !strings.Contains(err.Error(), "reference trainer") {
		t.Fatalf("CheckTrain(gpt-oss) = %v, want an *UnsupportedError naming gpt-oss and the reference trainer", err)
	}
	tokens := moeTokens(9, m.arch.Vocab, 1)
	if _, err := m.ForwardLoss(tokens[:8], tokens[1:], 1, 8); err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(); !errors.Is(err, ErrGptOssBackward) {
		t.Errorf("Backward = %v, want ErrGptOssBackward", err)
	}
}

// TestGptOssRouting: the router takes the top-k logits (bias included) and
// softmaxes those k (GptOssTopKRouter.forward), and ExpertStats counts
// every routed row for REAP and frequency.
func TestGptOssRouting(t *testing.T) {
	m := gptOssModel(t, 6)
	const T = 16
	var rs []*Routing
	var logits [][]float32
	st := NewExpertStats(len(m.dims))
	m.SetObserver(ObserverFunc(func(a *Activation) {
		st.Observe(a)
		if a.Site == SiteMoERouting && a.Layer == 0 {
			rs, logits = append(rs, a.Routing), append(logits, slices.Clone(a.Data))
		}
	}))
	if _, err := m.Forward(moeTokens(T, m.arch.Vocab, 3), 1, T); err != nil {
		t.Fatal(err)
	}
	m.SetObserver(nil)
	r, lg := rs[0], logits[0]
	E, k := r.NumExperts, r.TopK
	for i := range T {
		row := lg[i*E : (i+1)*E]
		order := make([]int, E)
		for j := range order {
			order[j] = j
		}
		slices.SortStableFunc(order, func(a, b int) int {
			switch {
			case row[a] > row[b]:
				return -1
			case row[a] < row[b]:
				return 1
			}
			return 0
		})
		var z float64
		for _, e := range order[:k] {
			z += math.Exp(float64(row[e] - row[order[0]]))
		}
		for s := range k {
			e := order[s]
			if int(r.Experts[i*k+s]) != e {
				t.Fatalf("row %d slot %d: expert %d, want %d (logits %v)", i, s, r.Experts[i*k+s], e, row)
			}
			want := math.Exp(float64(row[e]-row[order[0]])) / z
			if math.Abs(float64(r.Weights[i*k+s])-want) > 1e-6 {
				t.Errorf("row %d slot %d: weight %g, want %g", i, s, r.Weights[i*k+s], want)
			}
		}
	}
	for l := range m.dims {
		var n int64
		for _, c := range st.Counts[l] {
			n += c
		}
		if st.Rows[l] != T || n != T*int64(k) {
			t.Errorf("layer %d: %d rows, %d routed slots; want %d, %d", l, st.Rows[l], n, T, T*k)
		}
		for e, v := range st.REAP(l) {
			if st.Counts[l][e] > 0 && !(v > 0) {
				t.Errorf("layer %d expert %d: REAP %g for %d rows", l, e, v, st.Counts[l][e])
			}
		}
	}
}

// TestGptOssClampAndSwiGLU: one expert's output is the clamped SwiGLU of
// GptOssExperts.forward computed here in float64 from the stacked, interleaved
// gate_up_proj, and the clamp is reached.
func TestGptOssClampAndSwiGLU(t *testing.T) {
	m := gptOssModel(t, 8)
	d := m.dims[0].moe
	H, W := m.arch.Hidden, d.width
	const n, e = 5, 2
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, n*H)
	for i := range x {
		x[i] = float32(3 * r.NormFloat64())
	}
	w := &m.p.layers[0]
	y := make([]float32, n*H)
	gptOssExpert(y, x, make([]float32, n*W), make([]float32, n*2*W), d, m.mats(0), w, e, n, H)
	gu, gub := w.stacked.gateUp[e*H*2*W:(e+1)*H*2*W], w.stacked.gateUpB[e*2*W:(e+1)*2*W]
	dn, dnb := w.stacked.down[e*W*H:(e+1)*W*H], w.stacked.downB[e*H:(e+1)*H]
	lim, alpha := float64(d.limit), float64(d.alpha)
	clamped := 0
	var worst float64
	for i := range n {
		h := make([]float64, W)
		for j := range W {
			g, u := float64(gub[2*j]), float64(gub[2*j+1])
			for c := range H {
				g += float64(x[i*H+c]) * float64(gu[c*2*W+2*j])
				u += float64(x[i*H+c]) * float64(gu[c*2*W+2*j+1])
			}
			if g > lim || math.Abs(u) > lim {
				clamped++
			}
			g, u = min(g, lim), min(max(u, -lim), lim)
			h[j] = (u + 1) * g / (1 + math.Exp(-alpha*g))
		}
		for c := range H {
			want := float64(dnb[c])
			for j := range W {
				want += h[j] * float64(dn[j*H+c])
			}
			worst = max(worst, math.Abs(float64(y[i*H+c])-want)/(1+math.Abs(want)))
		}
	}
	if clamped == 0 {
		t.Error("the clamp was not reached")
	}
	if worst > 1e-5 {
		t.Errorf("expert output differs from the float64 clamped SwiGLU by %.3g", worst)
	}
}

// TestRopeYarnGate: YaRN runs for gpt-oss only; a gpt-oss config without
// rope scaling gets GptOssConfig's YaRN (attention factor 0.1·ln 32 + 1),
// one that says rope_type "default" none.
func TestRopeYarnGate(t *testing.T) {
	llama := `{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":16,"intermediate_size":24,
		"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":1,"vocab_size":32,"max_position_embeddings":256,
		"rope_scaling":{"rope_type":"yarn","factor":4,"original_max_position_embeddings":64}}`
	a, err := architecture.FromConfig([]byte(llama))
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(a); err == nil || !strings.Contains(err.Error(), "yarn") {
		t.Errorf("Check(llama with yarn) = %v, want a refusal naming yarn", err)
	}
	bad := strings.Replace(gptOssTestConfig, `"beta_fast":32.0`, `"beta_fast":-1`, 1)
	if a, err := architecture.FromConfig([]byte(bad)); err != nil {
		t.Fatal(err)
	} else if err := Check(a); err == nil || !strings.Contains(err.Error(), "beta_fast") {
		t.Errorf("Check(yarn beta_fast -1) = %v, want a refusal naming beta_fast", err)
	}
	base := strings.Replace(gptOssTestConfig, `"rope_scaling":{"rope_type":"yarn","factor":4.0,"beta_fast":32.0,"beta_slow":1.0,
	"truncate":false,"original_max_position_embeddings":64},`, "", 1)
	for _, c := range []struct {
		name, cfg string
		scale     float64
	}{
		{"absent", base, 0.1*math.Log(32) + 1},
		{"default", strings.Replace(base, `"rope_theta":100,`, `"rope_theta":100,"rope_scaling":{"rope_type":"default"},`, 1), 1},
		{"given", gptOssTestConfig, 0.1*math.Log(4) + 1},
	} {
		a, err := architecture.FromConfig([]byte(c.cfg))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := Check(a); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tab := newRopeTable(a, 16)
		if math.Abs(float64(tab.scale)-c.scale) > 1e-6 {
			t.Errorf("%s: attention factor %g, want %g", c.name, tab.scale, c.scale)
		}
	}
}

// TestGptOssMXFP4Refused: a checkpoint whose experts are MXFP4 blocks and
// scales (gate_up_proj_blocks, gate_up_proj_scales, as gpt-oss is
// released) is refused by name with "dequantize first".
func TestGptOssMXFP4Refused(t *testing.T) {
	m := gptOssModel(t, 2)
	dir := filepath.Join(t.TempDir(), "model")
	if err := m.Save(dir, checkpoint.F32); err != nil {
		t.Fatal(err)
	}
	const name = "model.layers.0.mlp.experts.gate_up_proj"
	var specs []checkpoint.TensorSpec
	for _, s := range m.Specs() {
		shape := make([]int64, len(s.Shape))
		for i, d := range s.Shape {
			shape[i] = int64(d)
		}
		if s.Name == name {
			// [E, 2W, H/32, 16] bytes of e2m1 pairs and [E, 2W, H/32] E8M0 scales.
			e, w2, h := shape[0], shape[2], shape[1]
			specs = append(specs, checkpoint.TensorSpec{Name: name + "_blocks", DType: checkpoint.U8, Shape: []int64{e, w2, h / 32, 16}},
				checkpoint.TensorSpec{Name: name + "_scales", DType: checkpoint.U8, Shape: []int64{e, w2, h / 32}})
			continue
		}
		specs = append(specs, checkpoint.TensorSpec{Name: s.Name, DType: checkpoint.F32, Shape: shape})
	}
	w, err := checkpoint.Create(filepath.Join(dir, checkpoint.SingleFileName), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if s.DType == checkpoint.U8 {
			if err := w.WriteTensor(s.Name, make([]byte, s.NumElements())); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := w.WriteFloat32(s.Name, m.Tensor(s.Name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir)
	var me *MissingTensorError
	if !errors.As(err, &me) || !me.MXFP4 || !strings.Contains(err.Error(), "dequantize first") {
		t.Fatalf("Load of an MXFP4 checkpoint = %v, want a *MissingTensorError saying to dequantize first", err)
	}
	t.Log(err)
}
