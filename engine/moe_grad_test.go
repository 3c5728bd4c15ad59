package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
)

// moeCases are the routing rules the MoE gradient tests cover: Mixtral
// (always renormalised) and Qwen3-MoE with norm_topk_prob false and true.
var moeCases = []struct {
	name, class, typ string
	experts, topK    int
	raw              map[string]any
	renorm           bool
}{
	{"mixtral", architecture.Mixtral, "mixtral", 4, 2, nil, true},
	{"qwen3-moe", architecture.Qwen3MoE, "qwen3_moe", 6, 3, nil, false},
	{"qwen3-moe-norm-topk", architecture.Qwen3MoE, "qwen3_moe", 6, 3, map[string]any{"norm_topk_prob": true}, true},
}

// fdPick returns up to 10 indices of a tensor of n elements: a spread
// plus the largest gradients.
func fdPick(grad []float32) []int {
	n := len(grad)
	idx := map[int]bool{}
	for j := 0; j < n; j += max(1, n/5) {
		idx[j] = true
	}
	for range 5 {
		best := -1
		for j := range n {
			if !idx[j] && (best < 0 || math.Abs(float64(grad[j])) > math.Abs(float64(grad[best]))) {
				best = j
			}
		}
		if best >= 0 {
			idx[best] = true
		}
	}
	out := make([]int, 0, len(idx))
	for j := range idx {
		out = append(out, j)
	}
	slices.Sort(out)
	return out
}

// fdCheck compares the gradient g of the named tensor p with central
// differences of loss (step h) at fdPick's elements; loss reports false
// when the step changed a top-k selection, and such an element is skipped
// (counted in *skipped). It returns the relative error over the checked
// elements and the root mean square of their gradients, and fails elements
// off by more than absTol + relTol·|fd|.
func fdCheck(t *testing.T, name string, p, g []float32, h float64, loss func() (float64, bool), absTol, relTol float64, checked, skipped *int) (rel, rms float64) {
	t.Helper()
	var num, den, gg float64
	n := 0
	for _, j := range fdPick(g) {
		orig := p[j]
		p[j] = orig + float32(h)
		lp, ok1 := loss()
		p[j] = orig - float32(h)
		lm, ok2 := loss()
		p[j] = orig
		if !ok1 || !ok2 {
			*skipped++
			continue
		}
		*checked++
		// The step actually taken in float32.
		step := float64(orig+float32(h)) - float64(orig-float32(h))
		fd := (lp - lm) / step
		gj := float64(g[j])
		gg += gj * gj
		n++
		num += (gj - fd) * (gj - fd)
		den += gj*gj + fd*fd
		if math.Abs(gj-fd) > absTol+relTol*math.Abs(fd) {
			t.Errorf("%s[%d]: backward %.6g, finite difference %.6g", name, j, gj, fd)
		}
	}
	if den == 0 {
		t.Errorf("%s: gradient and finite difference both zero at every checked element: the check cannot see this tensor", name)
		return 0, 0
	}
	return math.Sqrt(num / den), math.Sqrt(gg / float64(n))
}

// TestMoEBlockGradients checks moeBackward on its own against central
// differences (float32, step 1e-2, the loss Σ c·out summed in float64 with
// fixed random c): the gradients of the block input, of the router and of
// every expert's gate, up and down matrices, for each routing rule. A step
// that changes any row's top-k selection is not a derivative of the piece
// the backward pass differentiates: it is skipped, and the test fails if
// more than a tenth of the elements had to be.
func TestMoEBlockGradients(t *testing.T) {
	for _, c := range moeCases {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(moeArch(c.class, c.typ, c.experts, c.topK, c.raw), 4)
			if err != nil {
				t.Fatal(err)
			}
			d := m.dims[0].moe
			if d.rule.Renormalize != c.renorm {
				t.Fatalf("router rule renormalises = %v, want %v", d.rule.Renormalize, c.renorm)
			}
			r := rand.New(rand.NewPCG(8, 9))
			for i := range m.params {
				m.params[i] = float32(0.4 * r.NormFloat64())
			}
			const N = 13
			H := m.arch.Hidden
			x, dout := make([]float32, N*H), make([]float32, N*H)
			for i := range x {
				x[i], dout[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			wm, w, g := m.mats(0), &m.p.layers[0], &m.g.layers[0]
			out := make([]float32, N*H)
			save := newMoESaved(d, N)
			base, _ := moeForward(out, x, d, wm, w, N, H, save)
			// The saved forward computes what the unsaved one does.
			ref := make([]float32, N*H)
			moeForward(ref, x, d, wm, w, N, H, nil)
			bitEqual(t, "saved vs unsaved forward", out, ref)
			dx := make([]float32, N*H)
			m.ZeroGrad()
			moeBackward(dx, g, dout, x, w, d, save, newMoEBackBufs(m.dims, N, H), N, H)

			loss := func() (float64, bool) {
				rr, _ := moeForward(ref, x, d, m.mats(0), w, N, H, nil)
				var l float64
				for i, v := range ref {
					l += float64(dout[i]) * float64(v)
				}
				return l, slices.Equal(rr.Experts, base.Experts)
			}
			var checked, skipped int
			const h, absTol, relTol, maxRel = 1e-2, 2e-3, 1e-2, 2e-3
			check := func(name string, p, gr []float32) {
				rel, _ := fdCheck(t, name, p, gr, h, loss, absTol, relTol, &checked, &skipped)
				if rel > maxRel {
					t.Errorf("%s: relative gradient error %.3g > %g", name, rel, maxRel)
				}
				t.Logf("%-22s rel err %.2e", name, rel)
			}
			check("x", x, dx)
			check("router", w.router, g.router)
			for e := range d.experts {
				ew, eg := w.experts[e], g.experts[e]
				check(fmt.Sprintf("expert %d gate", e), ew.gate, eg.gate)
				check(fmt.Sprintf("expert %d up", e), ew.up, eg.up)
				check(fmt.Sprintf("expert %d down", e), ew.down, eg.down)
			}
			t.Logf("%d elements checked, %d skipped (a step changed a top-k selection)", checked, skipped)
			if skipped*10 > checked+skipped {
				t.Errorf("%d of %d elements skipped for a changed top-k selection: the fixture's margins are too small", skipped, checked+skipped)
			}
		})
	}
}

// routingRecorder records the top-k experts every MoE layer chose in the
// last forward pass.
type routingRecorder struct{ experts [][]int32 }

func (r *routingRecorder) Observe(a *Activation) {
	if a.Site != SiteMoERouting {
		return
	}
	for len(r.experts) <= a.Layer {
		r.experts = append(r.experts, nil)
	}
	r.experts[a.Layer] = append(r.experts[a.Layer][:0], a.Routing.Experts...)
}

// TestMoEGradientsFiniteDifferences checks Backward through a whole tiny
// MoE model (attention with qk-norm for Qwen3-MoE, two MoE layers) against
// central differences of the mean cross-entropy, for every parameter
// tensor and each routing rule, skipping steps that change a top-k
// selection as TestMoEBlockGradients does.
func TestMoEGradientsFiniteDifferences(t *testing.T) {
	for _, c := range moeCases {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(moeArch(c.class, c.typ, c.experts, c.topK, c.raw), 1)
			if err != nil {
				t.Fatal(err)
			}
			randomize(m, 3, 0.3)
			// Routers 4× larger: clear top-k margins, so that few steps
			// change a selection.
			for _, s := range m.specs {
				if s.kind == "moe_router" {
					for j, w := range m.Tensor(s.Name) {
						m.Tensor(s.Name)[j] = 4 * w
					}
				}
			}
			const B, T = 2, 5
			r := rand.New(rand.NewPCG(5, 6))
			tokens := randTokens(r, B*T, m.arch.Vocab)
			targets := randTokens(r, B*T, m.arch.Vocab)
			targets[3] = -1
			rec := &routingRecorder{}
			m.SetObserver(rec)
			m.ZeroGrad()
			if _, err := m.ForwardLoss(tokens, targets, B, T); err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(); err != nil {
				t.Fatalf("Backward on an MoE model: %v", err)
			}
			base := make([][]int32, len(rec.experts))
			for l, e := range rec.experts {
				base[l] = slices.Clone(e)
			}
			grads := slices.Clone(m.Grads())
			loss := func() (float64, bool) {
				l, err := m.ForwardLoss(tokens, targets, B, T)
				if err != nil {
					t.Fatal(err)
				}
				for i := range base {
					if !slices.Equal(base[i], rec.experts[i]) {
						return 0, false
					}
				}
				return float64(l), true
			}
			var checked, skipped int
			const fdStep, resolution = 3e-3, 1e-3
			for i, s := range m.specs {
				off, n := m.offsets[i], s.Size()
				rel, rms := fdCheck(t, s.Name, m.params[off:off+n], grads[off:off+n], fdStep, loss, 2e-3, 5e-2, &checked, &skipped)
				// The loss is float32: one ulp of it over the step is about
				// 4e-5, so gradients much below 1e-3 (an expert few rows
				// reach, with a small routing weight) are checked by the
				// element tolerance only (and by TestMoEGradParityTorch).
				switch {
				case rms < resolution:
					t.Logf("%-50s |g| %.1e below the finite-difference resolution: element tolerance only", s.Name, rms)
				case rel > 1e-2:
					t.Errorf("%s: relative gradient error %.3g (|g| %.2g)", s.Name, rel, rms)
				default:
					t.Logf("%-50s rel err %.2e (|g| %.1e)", s.Name, rel, rms)
				}
			}
			t.Logf("%d elements checked, %d skipped (a step changed a top-k selection)", checked, skipped)
			if skipped*10 > checked+skipped {
				t.Errorf("%d of %d elements skipped for a changed top-k selection", skipped, checked+skipped)
			}
		})
	}
}

// TestMoEGradParityTorch compares Backward's gradients on small random
// Mixtral and Qwen3-MoE checkpoints (norm_topk_prob false and true) with
// torch autograd through testdata/moe_reference.py, which re-states
// transformers' MoE modeling in plain torch and differentiates it in
// float64 (Debian's /usr/bin/python3 with torch; skipped without them):
// the same top-k selections, the loss within 1e-5 relative, and every
// tensor's gradient within 1e-3 relative (‖Δ‖/‖g_torch‖).
func TestMoEGradParityTorch(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s is absent: the MoE gradient parity against torch is not checked (install Debian's python3 and python3-torch)", python)
	}
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s has no torch (%v): the MoE gradient parity against torch is not checked (install python3-torch)", python, err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "moe_reference.py"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range moeCases {
		t.Run(c.name, func(t *testing.T) {
			a := moeArch(c.class, c.typ, c.experts, c.topK, c.raw)
			base := t.TempDir()
			m := routedModel(t, a)
			dir := filepath.Join(base, "ckpt")
			if err := m.Save(dir, checkpoint.F32); err != nil {
				t.Fatal(err)
			}
			const B, T = 2, 11
			tokens := moeTokens(B*T, a.Vocab, 4)
			targets := moeTokens(B*T, a.Vocab, 5)
			targets[4] = -1
			tj, err := json.Marshal(map[string]any{"B": B, "T": T, "tokens": tokens, "targets": targets})
			if err != nil {
				t.Fatal(err)
			}
			tokPath, outPath := filepath.Join(base, "tokens.json"), filepath.Join(base, "out.json")
			if err := os.WriteFile(tokPath, tj, 0o666); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(python, "-B", script, dir, tokPath, outPath).CombinedOutput(); err != nil {
				t.Fatalf("moe_reference.py: %v\n%s", err, out)
			}
			data, err := os.ReadFile(outPath)
			if err != nil {
				t.Fatal(err)
			}
			var ref struct {
				Loss     float64
				Selected [][]int32
				Grads    map[string][]float64
			}
			if err := json.Unmarshal(data, &ref); err != nil {
				t.Fatal(err)
			}
			rec := &routingRecorder{}
			m.SetObserver(rec)
			m.ZeroGrad()
			loss, err := m.ForwardLoss(tokens, targets, B, T)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(); err != nil {
				t.Fatal(err)
			}
			for l := range a.Layers {
				if l >= len(ref.Selected) || !slices.Equal(rec.experts[l], ref.Selected[l]) {
					t.Fatalf("layer %d: the engine's top-k selection differs from torch's (a near-tie): the gradients are of different pieces", l)
				}
			}
			if d := math.Abs(float64(loss)-ref.Loss) / ref.Loss; d > 1e-5 {
				t.Errorf("loss %.7g, torch %.7g (relative %.2g)", loss, ref.Loss, d)
			}
			var worst float64
			for _, s := range m.Specs() {
				want, ok := ref.Grads[s.Name]
				got := m.Grad(s.Name)
				if !ok || len(want) != len(got) {
					t.Errorf("%s: torch gave %d gradient values (present %v), the engine %d", s.Name, len(want), ok, len(got))
					continue
				}
				var num, den float64
				for j, v := range want {
					num += (float64(got[j]) - v) * (float64(got[j]) - v)
					den += v * v
				}
				if den == 0 {
					t.Errorf("%s: torch's gradient is zero: the fixture does not exercise it", s.Name)
					continue
				}
				rel := math.Sqrt(num / den)
				worst = max(worst, rel)
				if rel > 1e-3 {
					t.Errorf("%s: ‖g − g_torch‖ / ‖g_torch‖ = %.3g > 1e-3", s.Name, rel)
				}
			}
			t.Logf("%s: loss %.6f (torch %.6f), worst relative gradient error %.2e over %d tensors", c.name, loss, ref.Loss, worst, len(m.Specs()))
		})
	}
}

// TestMoECheckTrain: CheckTrain accepts the MoE layers the engine trains
// (Mixtral, Qwen3-MoE) and refuses gpt-oss (top-k before softmax), which
// Check accepts: the engine runs it forward only.
func TestMoECheckTrain(t *testing.T) {
	for _, c := range moeCases {
		if err := CheckTrain(moeArch(c.class, c.typ, c.experts, c.topK, c.raw)); err != nil {
			t.Errorf("CheckTrain(%s) = %v, want nil", c.name, err)
		}
	}
	a := moeArch(architecture.GptOss, "gpt_oss", 4, 2, nil)
	for i := range a.Layers {
		a.Layers[i].MoE.RouterBias, a.Layers[i].MoE.ExpertBias = true, true
		a.Layers[i].MoE.SwiGLUAlpha, a.Layers[i].MoE.SwiGLULimit = 1.702, 7
		a.Layers[i].Attention.Sinks = true
	}
	if Check(a) != nil || CheckTrain(a) == nil {
		t.Errorf("Check(gpt-oss) = %v, CheckTrain = %v: want nil and a refusal", Check(a), CheckTrain(a))
	}
}
