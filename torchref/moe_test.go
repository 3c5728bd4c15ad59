package torchref

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/train"
)

// moeGradcheck is run by TestMoEGradcheck with the trainer's directory as
// argv[1]: torch.autograd.gradcheck (float64, central differences) of
// acmoe.SparseMoE with respect to its input and every parameter (router
// and experts), for each router rule; it prints one JSON object of case
// name → {"ok", "routed", "gate_grad"}.
const moeGradcheck = `
import json, sys
import torch
sys.path.insert(0, sys.argv[1])
import acmoe
try:
    from torch.func import functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call

torch.manual_seed(0)
out = {}
for name, cls, norm in (("qwen3-moe", "Qwen3MoeForCausalLM", False), ("qwen3-moe-norm", "Qwen3MoeForCausalLM", True),
                        ("mixtral", "MixtralForCausalLM", True)):
    blk = acmoe.SparseMoE(6, acmoe.Spec(cls, 5, 2, 4, norm)).double()
    names = [n for n, _ in blk.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for _, p in blk.named_parameters()]
    x = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)

    def f(x, *ps):
        return functional_call(blk, dict(zip(names, ps)), (x,))

    ok = torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-7, rtol=1e-5)
    _, e = blk.route(x.reshape(-1, 6))
    f(x, *params).sum().backward()
    out[name] = dict(ok=bool(ok), routed=len(set(e.flatten().tolist())),
                     gate_grad=params[names.index("gate.weight")].grad.abs().max().item())
print(json.dumps(out))
`

// TestMoEGradcheck: the torch MoE block's gradients (input, router,
// experts) equal central finite differences in float64 for Qwen3-MoE's
// rule with and without norm_topk_prob and for Mixtral's; the router gets
// a gradient through the routing weights.
func TestMoEGradcheck(t *testing.T) {
	needTorch(t)
	dir := filepath.Dir(trainer(t))
	cmd := pyCmd("-c", moeGradcheck, dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gradcheck: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res map[string]struct {
		OK       bool    `json:"ok"`
		Routed   int     `json:"routed"`
		GateGrad float64 `json:"gate_grad"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	for _, name := range []string{"qwen3-moe", "qwen3-moe-norm", "mixtral"} {
		r, ok := res[name]
		switch {
		case !ok:
			t.Errorf("%s: no result in %s", name, out)
		case !r.OK:
			t.Errorf("%s: gradcheck failed", name)
		case r.Routed < 2:
			t.Errorf("%s: the rows reached %d expert(s); the check needs several", name, r.Routed)
		case r.GateGrad == 0:
			t.Errorf("%s: the router has no gradient", name)
		}
		t.Logf("%s: gradcheck %v, %d experts routed, max |d/d gate| %.3g", name, r.OK, r.Routed, r.GateGrad)
	}
}

// moeChild prunes expert 1 of the 6 of every MoE layer of the Qwen3-MoE
// model in dir (top-k 2 kept), and sets layer 0's router rows to v, −v,
// u, −u, 0: of each pair one logit is ≥ 0, so with top-2 the last expert
// is never chosen before training changes the rows (an expert no row
// reaches, with no gradient).
func moeChild(t testing.TB, dir string) string {
	t.Helper()
	a, err := architecture.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	plan := &prune.Plan{Version: 1}
	for i, l := range a.Layers {
		if l.MoE != nil {
			plan.Layers = append(plan.Layers, prune.LayerPlan{Layer: i, Experts: []int{0, 2, 3, 4, 5}})
		}
	}
	pruned := filepath.Join(t.TempDir(), "pruned")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: dir, Plan: plan, Out: pruned}); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(pruned)
	if err != nil {
		t.Fatal(err)
	}
	g := m.Tensor("model.layers.0.mlp.gate.weight") // (5, hidden)
	H := len(g) / 5
	for c := range H {
		g[H+c], g[3*H+c], g[4*H+c] = -g[c], -g[2*H+c], 0
	}
	out := filepath.Join(t.TempDir(), "child")
	if err := m.Save(out, checkpoint.F32); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDistillMoE: a Qwen3-MoE child with one of its 6 experts pruned is
// distilled from its parent by the torch job on 2 gloo ranks, with an
// expert no row reaches at first (DDP's unused parameters, a zero
// gradient); the KD loss on a repeated batch falls, the checkpoint
// validates, loads in the native engine with the child's shape (5
// experts, top-2), and the native engine's held-out loss of it equals the
// torch job's (1e-4 relative).
func TestDistillMoE(t *testing.T) {
	needTorch(t)
	teacher := randomModel(t, familyConfigs["qwen3-moe"], 5)
	student := moeChild(t, teacher)
	r := distillRecipe{steps: 12, batch: 4, seqLen: 16, warmup: 2, lr: 3e-3, minLR: 3e-4, wd: 0.1, clip: 1,
		temp: 1, kd: 1, ce: 0.1, seed: 1}
	j, res, valid := distillRepeated(t, teacher, student, r, 21)
	out := filepath.Join(j.dir, "out")
	m, err := engine.Load(out)
	if err != nil {
		t.Fatalf("the torch checkpoint does not load in the native engine: %v", err)
	}
	if x := m.Arch().Layers[0].MoE; x == nil || x.Experts != 5 || x.TopK != 2 {
		t.Errorf("layer 0 MoE %+v, want 5 experts, top-2", x)
	}
	ln, err := train.MeanLoss(m, valid, r.batch)
	if err != nil {
		t.Fatal(err)
	}
	lt := res["loss"].(float64)
	t.Logf("held-out loss of the trained child: torch %.6f, native engine %.6f", lt, ln)
	if rel1(ln, lt) > 1e-4 {
		t.Errorf("held-out loss: native %.6f, torch %.6f (%.2g relative, want ≤ 1e-4)", ln, lt, rel1(ln, lt))
	}
	// The weights moved: the trained router differs from the child's.
	name := "model.layers.0.mlp.gate.weight"
	if relErr(readTensor(t, filepath.Join(out, "model.safetensors"), name), readTensor(t, filepath.Join(student, "model.safetensors"), name)) == 0 {
		t.Errorf("%s did not change in training", name)
	}
}
