package torchref

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// nemotronMoECheck is run by TestNemotronMoE with the trainer's directory
// as argv[1]. For each case it compares acmoe.NemotronMoE's float32
// forward with reference(), an independent float64 row-by-row loop
// written from transformers' models/nemotron_h/modeling_nemotron_h.py
// (NemotronHTopkRouter.forward, NemotronHMoE.route_tokens_to_experts and
// .forward, NemotronHExperts.forward, NemotronHMLP.forward); runs
// torch.autograd.gradcheck (float64, central differences) with respect to
// the input and every trainable parameter (router, latent projections,
// routed and shared experts); counts the rows whose experts change without
// the correction bias and without the group limit; and tries the
// refusals. It prints one JSON object.
const nemotronMoECheck = `
import json, sys, math
import torch
import torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
import acmoe
try:
    from torch.func import functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call
def reference(blk, x):
    """Row by row, in float64 Python loops, NemotronHMoE.forward's math
    (route_tokens_to_experts, NemotronHExperts.forward, NemotronHMLP)."""
    s, H = blk.spec, x.shape[-1]
    W = blk.gate.weight.double(); bias = blk.gate.e_score_correction_bias.double()
    out = []
    for row in x.reshape(-1, H).double():
        score = [1 / (1 + math.exp(-float(W[j] @ row))) for j in range(s.experts)]
        choice = [score[j] + float(bias[j]) for j in range(s.experts)]
        per = s.experts // s.n_group
        gs = [sum(sorted(choice[g * per:(g + 1) * per], reverse=True)[:2]) for g in range(s.n_group)]
        kept = sorted(range(s.n_group), key=lambda g: -gs[g])[:s.topk_group]
        cand = [j for j in range(s.experts) if j // per in kept]
        chosen = sorted(cand, key=lambda j: -choice[j])[:s.top_k]
        w = [score[j] for j in chosen]
        if s.norm_topk_prob:
            t = sum(w) + 1e-20
            w = [v / t for v in w]
        w = [v * s.scale for v in w]
        lin = lambda m, v: F.linear(v, m.weight.double(), None if m.bias is None else m.bias.double())
        h = lin(blk.fc1_latent_proj, row) if s.latent else row
        y = torch.zeros_like(h)
        for wj, j in zip(w, chosen):
            e = blk.experts[j]
            y = y + wj * lin(e.down_proj, torch.relu(lin(e.up_proj, h)) ** 2)
        if s.latent:
            y = lin(blk.fc2_latent_proj, y)
        sh = blk.shared_experts
        out.append(y + lin(sh.down_proj, torch.relu(lin(sh.up_proj, row)) ** 2))
    return torch.stack(out).reshape(x.shape)

torch.manual_seed(0)
cases = {
    # Nano's routing (n_group 1, norm, scale 2.5)
    "nano": acmoe.NemotronSpec(8, 3, 5, 7, 0, 1, 1, True, 2.5, False),
    # group-limited: 4 groups of 2, 2 kept, no norm, with biases
    "grouped": acmoe.NemotronSpec(8, 3, 5, 7, 0, 4, 2, False, 1.5, True),
    # Super's LatentMoE projections
    "latent": acmoe.NemotronSpec(6, 2, 5, 7, 4, 2, 1, True, 5.0, False),
}
out = {}
for name, spec in cases.items():
    spec.check(ValueError)
    blk = acmoe.NemotronMoE(6, spec)
    with torch.no_grad():
        for n, p in blk.named_parameters():
            p.copy_(torch.randn_like(p) * (0.5 if p.dim() > 1 else 0.3))
    x = torch.randn(2, 5, 6)
    got = blk(x)
    want = reference(blk, x)
    rel = ((got.double() - want).abs().max() / want.abs().max()).item()
    b64 = blk.double()
    names = [n for n, p in b64.named_parameters() if p.requires_grad]
    params = [p.detach().clone().requires_grad_(True) for n, p in b64.named_parameters() if p.requires_grad]
    fixed = {n: p for n, p in b64.named_parameters() if not p.requires_grad}
    x64 = x.double().requires_grad_(True)
    def f(x, *ps):
        return functional_call(b64, {**fixed, **dict(zip(names, ps))}, (x,))
    ok = torch.autograd.gradcheck(f, (x64, *params), eps=1e-6, atol=1e-6, rtol=1e-5)
    _, e = b64.route(x64.reshape(-1, 6))
    f(x64, *params).sum().backward()
    g = {n: 0.0 if params[i].grad is None else params[i].grad.abs().max().item() for i, n in enumerate(names)}
    # The rules that can fail: the group limit and the correction bias
    # change which experts some row gets.
    def chosen(**kw):
        old = {k: getattr(spec, k) for k in kw}
        for k, v in kw.items():
            setattr(spec, k, v)
        with torch.no_grad():
            sel = [set(r) for r in b64.route(x64.reshape(-1, 6))[1].tolist()]
        for k, v in old.items():
            setattr(spec, k, v)
        return sel
    base = chosen()
    bias = b64.gate.e_score_correction_bias.detach().clone()
    with torch.no_grad():
        b64.gate.e_score_correction_bias.zero_()
    nobias = chosen()
    with torch.no_grad():
        b64.gate.e_score_correction_bias.copy_(bias)
    ungrouped = chosen(topk_group=spec.n_group)
    out[name] = dict(bias_moves=sum(a != b for a, b in zip(base, nobias)),
                     group_moves=sum(a != b for a, b in zip(base, ungrouped)),
rel=rel, ok=bool(ok), routed=len(set(e.flatten().tolist())), gate_grad=g["gate.weight"],
                     shared_grad=g["shared_experts.up_proj.weight"], min_grad=min(v for n, v in g.items() if ".experts." not in "." + n),
                     bias_trainable="gate.e_score_correction_bias" in names)
# refusals
bad = {}
for name, spec in {"topk_group>n_group": acmoe.NemotronSpec(8, 2, 5, 7, 0, 2, 3),
                   "k>kept": acmoe.NemotronSpec(8, 5, 5, 7, 0, 4, 2),
                   "n_group∤experts": acmoe.NemotronSpec(6, 2, 5, 7, 0, 4, 1)}.items():
    try:
        spec.check(ValueError); bad[name] = ""
    except ValueError as e:
        bad[name] = str(e)
out["refused"] = bad
print(json.dumps(out))
`

// TestNemotronMoE: the torch Nemotron-H MoE mixer equals an independent
// reference of the modeling code's math (≤ 1e-4 relative) with Nano's
// routing (one group, norm_topk_prob, routed_scaling_factor 2.5), with
// group-limited routing and biases, and with Super's LatentMoE
// projections; its gradients equal central finite differences in float64;
// the router and the shared expert get gradients, the correction bias
// none (frozen) though it changes the choice; bad groupings are refused
// with what is valid.
func TestNemotronMoE(t *testing.T) {
	needTorch(t)
	cmd := pyCmd("-c", nemotronMoECheck, filepath.Dir(trainer(t)))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res map[string]json.RawMessage
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	for _, name := range []string{"nano", "grouped", "latent"} {
		var r struct {
			Rel           float64 `json:"rel"`
			OK            bool    `json:"ok"`
			Routed        int     `json:"routed"`
			GateGrad      float64 `json:"gate_grad"`
			SharedGrad    float64 `json:"shared_grad"`
			MinGrad       float64 `json:"min_grad"`
			BiasTrainable bool    `json:"bias_trainable"`
			BiasMoves     int     `json:"bias_moves"`
			GroupMoves    int     `json:"group_moves"`
		}
		if err := json.Unmarshal(res[name], &r); err != nil {
			t.Errorf("%s: %v in %s", name, err, out)
			continue
		}
		t.Logf("%s: forward %.3g relative to the reference, gradcheck %v, %d experts routed, max |d/d gate| %.3g, "+
			"rows moved by the bias %d, by the group limit %d", name, r.Rel, r.OK, r.Routed, r.GateGrad, r.BiasMoves, r.GroupMoves)
		switch {
		case !(r.Rel <= 1e-4):
			t.Errorf("%s: forward differs from the reference by %.3g relative (want ≤ 1e-4)", name, r.Rel)
		case !r.OK:
			t.Errorf("%s: gradcheck failed", name)
		case r.Routed < 2:
			t.Errorf("%s: the rows reached %d expert(s); the check needs several", name, r.Routed)
		case r.GateGrad == 0 || r.SharedGrad == 0 || r.MinGrad == 0:
			t.Errorf("%s: a parameter outside the routed experts has no gradient (router %g, shared %g, least %g)", name, r.GateGrad, r.SharedGrad, r.MinGrad)
		case r.BiasTrainable:
			t.Errorf("%s: e_score_correction_bias is trainable", name)
		case r.BiasMoves == 0:
			t.Errorf("%s: the correction bias changed no row's experts: the check cannot see it", name)
		}
	}
	var g struct {
		GroupMoves int `json:"group_moves"`
	}
	json.Unmarshal(res["grouped"], &g)
	if g.GroupMoves == 0 {
		t.Error("grouped: the group limit changed no row's experts: the check cannot see it")
	}
	var bad map[string]string
	if err := json.Unmarshal(res["refused"], &bad); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"topk_group>n_group": "1 <= topk_group <= n_group", "k>kept": "exceeds the 4 experts",
		"n_group∤experts": "divisor of n_routed_experts"} {
		if !strings.Contains(bad[name], want) {
			t.Errorf("%s: refusal %q, want it to say %q", name, bad[name], want)
		}
	}
}
