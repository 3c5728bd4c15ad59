package torchref

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
)

// gptOssConfig is a small gpt-oss: a sliding-window layer (window 5) and
// a full one, attention sinks, q/k/v/o biases, YaRN RoPE with a ramp that
// mixes interpolated and extrapolated frequencies (rope_theta 100,
// head_dim 16, truncate false, factor 4 = max_position_embeddings /
// original, as every transformers version reads it the same), 6 stacked
// experts of width 12 with top-2 and a clamp (swiglu_limit 0.5) that the
// random weights reach.
const gptOssConfig = `{"architectures":["GptOssForCausalLM"],"model_type":"gpt_oss","hidden_size":32,
	"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":300,
	"intermediate_size":12,"num_local_experts":6,"num_experts_per_tok":2,"sliding_window":5,
	"layer_types":["sliding_attention","full_attention"],"attention_bias":true,"rms_norm_eps":1e-5,
	"rope_theta":100,"rope_scaling":{"rope_type":"yarn","factor":4.0,"beta_fast":32.0,"beta_slow":1.0,
	"truncate":false,"original_max_position_embeddings":64},"swiglu_alpha":1.702,"swiglu_limit":0.5,
	"hidden_act":"silu","tie_word_embeddings":false,"max_position_embeddings":256}`

// gptOssCheck is run by TestGptOss with the trainer's directory as
// argv[1] and a random checkpoint of gptOssConfig as argv[2], a scratch
// directory as argv[3]. It compares acmodel's float32 logits with
// reference(), an independent float64 loop over rows written from
// transformers' models/gpt_oss/modeling_gpt_oss.py (GptOssRMSNorm,
// GptOssRotaryEmbedding.forward with modeling_rope_utils'
// _compute_yarn_parameters, GptOssAttention.forward and
// eager_attention_forward with its sink column, the sliding mask of
// masking_utils.sliding_window_overlay, GptOssTopKRouter.forward,
// GptOssExperts.forward, GptOssDecoderLayer.forward) on weights read
// straight from the safetensors file; the same reference without sinks,
// without the window and without the clamp shows each rule is seen;
// acmodel.yarn against the reference's YaRN for other constants;
// torch.autograd.gradcheck (float64) of the MoE block and of the sliding
// attention layer with respect to the input and every parameter; the
// MXFP4 refusal. It prints one JSON object.
const gptOssCheck = `
import json, math, os, shutil, sys
import torch
sys.path.insert(0, sys.argv[1])
import acio, acmodel, acmoe
try:
    from torch.func import functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call

ckpt, scratch = sys.argv[2], sys.argv[3]
cfg = json.load(open(os.path.join(ckpt, "config.json")))
W = {n: t.double() for n, t in acio.read_safetensors(os.path.join(ckpt, "model.safetensors"))[0].items()}

def ref_yarn(base, dim, s, maxpos):
    """_compute_yarn_parameters: (inverse frequencies, attention factor)."""
    old = s.get("original_max_position_embeddings") or maxpos
    factor = s.get("factor") or maxpos / old
    def ms(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
    att = s.get("attention_factor")
    if att is None:
        att = ms(factor, s["mscale"]) / ms(factor, s["mscale_all_dim"]) if s.get("mscale") and s.get("mscale_all_dim") else ms(factor)
    fast, slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1
    cd = lambda rot: (dim * math.log(old / (rot * 2 * math.pi))) / (2 * math.log(base))
    lo, hi = cd(fast), cd(slow)
    if s.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    if lo == hi:
        hi += 0.001
    out = []
    for i in range(dim // 2):
        pos = base ** (2 * i / dim)
        ramp = min(max((i - lo) / (hi - lo), 0.0), 1.0)
        keep = 1 - ramp  # the extrapolation share
        out.append((1 / (factor * pos)) * (1 - keep) + (1 / pos) * keep)
    return out, att

def reference(tokens, sinks=True, window=True, clamp=True):
    """Logits (B, T, vocab) in float64, one row (position) at a time."""
    H, nh, kv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    E, K = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    alpha, limit = cfg["swiglu_alpha"], cfg["swiglu_limit"]
    eps = cfg["rms_norm_eps"]
    inv, att = ref_yarn(cfg["rope_theta"], hd, cfg["rope_scaling"], cfg["max_position_embeddings"])
    def rms(v, w):
        return v / math.sqrt(float((v * v).mean()) + eps) * w
    def rope(vec, t):  # one head (hd,)
        half = hd // 2
        out = vec.clone()
        for i in range(half):
            c, s = math.cos(t * inv[i]) * att, math.sin(t * inv[i]) * att
            a, b = float(vec[i]), float(vec[i + half])
            out[i], out[i + half] = a * c - b * s, b * c + a * s
        return out
    stats = {"clamped": 0, "experts": set()}
    B, T = tokens.shape
    logits = []
    for b in range(B):
        xs = [W["model.embed_tokens.weight"][int(tok)].clone() for tok in tokens[b]]
        for i in range(cfg["num_hidden_layers"]):
            p = f"model.layers.{i}."
            a = p + "self_attn."
            sliding = cfg["layer_types"][i] == "sliding_attention" and window
            lin = lambda name, v: W[name + ".weight"] @ v + W[name + ".bias"]
            n1 = [rms(x, W[p + "input_layernorm.weight"]) for x in xs]
            q = [lin(a + "q_proj", v).view(nh, hd) for v in n1]
            k = [lin(a + "k_proj", v).view(kv, hd) for v in n1]
            v = [lin(a + "v_proj", x).view(kv, hd) for x in n1]
            q = [torch.stack([rope(q[t][h], t) for h in range(nh)]) for t in range(T)]
            k = [torch.stack([rope(k[t][h], t) for h in range(kv)]) for t in range(T)]
            mids = []
            for t in range(T):
                heads = []
                for h in range(nh):
                    c = h // (nh // kv)
                    keys = [u for u in range(t + 1) if not sliding or t - u < cfg["sliding_window"]]
                    sc = [float(q[t][h] @ k[u][c]) / math.sqrt(hd) for u in keys]
                    sink = float(W[a + "sinks"][h]) if sinks else -math.inf
                    m = max(sc + [sink])
                    den = sum(math.exp(x - m) for x in sc) + math.exp(sink - m)
                    heads.append(sum(math.exp(x - m) / den * v[u][c] for x, u in zip(sc, keys)))
                mids.append(xs[t] + lin(a + "o_proj", torch.cat(heads)))
            xs = []
            for mid in mids:
                n2 = rms(mid, W[p + "post_attention_layernorm.weight"])
                r = lin(p + "mlp.router", n2)
                chosen = sorted(range(E), key=lambda j: -float(r[j]))[:K]
                z = [math.exp(float(r[j]) - float(r[chosen[0]])) for j in chosen]
                y = torch.zeros(H, dtype=torch.float64)
                for wj, j in zip([x / sum(z) for x in z], chosen):
                    stats["experts"].add(j)
                    e = p + "mlp.experts."
                    gu = n2 @ W[e + "gate_up_proj"][j] + W[e + "gate_up_proj_bias"][j]
                    out = torch.zeros(cfg["intermediate_size"], dtype=torch.float64)
                    for n in range(cfg["intermediate_size"]):
                        g, u = float(gu[2 * n]), float(gu[2 * n + 1])
                        if clamp:
                            stats["clamped"] += (g > limit) + (abs(u) > limit)
                            g, u = min(g, limit), min(max(u, -limit), limit)
                        out[n] = (u + 1) * g / (1 + math.exp(-alpha * g))
                    y = y + wj * (out @ W[e + "down_proj"][j] + W[e + "down_proj_bias"][j])
                xs.append(mid + y)
        logits.append(torch.stack([W["lm_head.weight"] @ rms(x, W["model.norm.weight"]) for x in xs]))
    return torch.stack(logits), stats

res = {}
m = acmodel.load(ckpt).eval()
res["names"] = acmodel.hf_names(m.arch)
res["shape"] = m.arch.shape()
res["windows"] = [l.window for l in m.arch.layers]
torch.manual_seed(0)
B, T = 2, 12
tokens = torch.randint(0, cfg["vocab_size"], (B, T))
with torch.no_grad():
    got = m(tokens).double()
want, stats = reference(tokens)
scale = want.abs().max()
res["rel"] = ((got - want).abs().max() / scale).item()
res["clamped"], res["routed"] = stats["clamped"], len(stats["experts"])
for name, kw in (("nosink", dict(sinks=False)), ("nowindow", dict(window=False)), ("noclamp", dict(clamp=False))):
    res["rel_" + name] = ((reference(tokens, **kw)[0] - want).abs().max() / scale).item()

# YaRN for other constants (truncate, attention_factor, mscale pairs).
worst = 0.0
for s in ({"factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096},
          {"factor": 8.0, "original_max_position_embeddings": 1024},
          {"factor": 4.0, "beta_fast": 16, "beta_slow": 2, "attention_factor": 0.9, "original_max_position_embeddings": 512},
          {"factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.5, "original_max_position_embeddings": 4096}):
    for base, dim in ((150000.0, 64), (100.0, 16), (10000.0, 128)):
        wi, wa = ref_yarn(base, dim, s, 131072)
        gi, ga = acmodel.yarn(base, dim, acmodel._yarn_params({"max_position_embeddings": 131072}, s))
        worst = max(worst, max(abs(a - b) / abs(b) for a, b in zip(gi.tolist(), wi)), abs(ga - wa) / wa)
res["yarn_rel"] = worst

# gradcheck in float64: the MoE block (router, stacked experts, clamp) ...
spec = acmoe.GptOssSpec(5, 2, 4, alpha=1.702, limit=0.5)
blk = acmoe.GptOssMoE(6, spec).double()
with torch.no_grad():
    for n, p in blk.named_parameters():
        p.copy_(torch.randn_like(p) * (0.5 if p.dim() > 1 else 0.3))
names = [n for n, _ in blk.named_parameters()]
params = [p.detach().clone().requires_grad_(True) for _, p in blk.named_parameters()]
x = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
f = lambda x, *ps: functional_call(blk, dict(zip(names, ps)), (x,))
res["moe_ok"] = bool(torch.autograd.gradcheck(f, (x, *params), eps=1e-6, atol=1e-7, rtol=1e-5))
f(x, *params).sum().backward()
res["moe_grads"] = {n: params[i].grad.abs().max().item() for i, n in enumerate(names)}
res["moe_routed"] = len(set(blk.route(x.detach().reshape(-1, 6))[1].flatten().tolist()))
gu = x.detach().reshape(-1, 6) @ blk.experts.gate_up_proj.detach()  # (E, N, 2W) before the bias
res["moe_clamped"] = int((gu[..., 0::2] > 0.5).sum() + (gu[..., 1::2].abs() > 0.5).sum())

# ... and the sliding attention layer with sinks, biases and YaRN.
att = m.model.layers[0].self_attn.double()
with torch.no_grad():
    att.sinks.copy_(torch.randn_like(att.sinks))
Ta = 8
rope = tuple(r.double() for r in m.ropes(Ta, "cpu")[cfg["head_dim"]])
names = [n for n, _ in att.named_parameters()]
params = [p.detach().clone().requires_grad_(True) for _, p in att.named_parameters()]
xa = torch.randn(2, Ta, cfg["hidden_size"], dtype=torch.float64, requires_grad=True)
g = lambda x, *ps: functional_call(att, dict(zip(names, ps)), (x, rope))
res["attn_ok"] = bool(torch.autograd.gradcheck(g, (xa, *params), eps=1e-6, atol=1e-7, rtol=1e-5))
g(xa, *params).sum().backward()
res["attn_grads"] = {n: params[i].grad.abs().max().item() for i, n in enumerate(names)}

# MXFP4 experts are refused with what to do.
q = os.path.join(scratch, "mxfp4")
os.makedirs(q)
shutil.copyfile(os.path.join(ckpt, "config.json"), os.path.join(q, "config.json"))
ts = {n: t.float() for n, t in W.items() if not n.endswith("experts.gate_up_proj")}
for i in range(cfg["num_hidden_layers"]):
    ts[f"model.layers.{i}.mlp.experts.gate_up_proj_blocks"] = torch.zeros(6, 24, 1, 16)
    ts[f"model.layers.{i}.mlp.experts.gate_up_proj_scales"] = torch.zeros(6, 24, 1)
acio.write_safetensors(os.path.join(q, "model.safetensors"), ts)
try:
    acmodel.load(q)
    res["mxfp4"] = ""
except acmodel.ConfigError as e:
    res["mxfp4"] = str(e)
print(json.dumps(res))
`

// TestGptOss: the torch trainer's gpt-oss (attention sinks, alternating
// sliding windows, q/k/v/o biases, YaRN RoPE, top-k-then-softmax router
// with bias, stacked experts with biases and the clamped SwiGLU) equals an
// independent float64 reference of transformers' math within 1e-5
// relative in float32 logits; leaving out the sinks, the window or the
// clamp moves the reference by far more (each rule is seen); YaRN's
// frequencies and attention factor match for other constants within 1e-12;
// the MoE block's and the attention layer's gradients equal central
// finite differences in float64 and reach every parameter; the tensor
// names are architecture's, in its order; the contract shape routes
// topk_softmax; an MXFP4 checkpoint is refused, saying to dequantize.
func TestGptOss(t *testing.T) {
	needTorch(t)
	dir := randomCheckpoint(t, gptOssConfig, 7)
	cmd := pyCmd("-c", gptOssCheck, filepath.Dir(trainer(t)), dir, t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r struct {
		Names                       []string
		Shape                       map[string]any
		Windows                     []int
		Rel, RelNoSink, RelNoWindow float64
		RelNoClamp                  float64
		Clamped, Routed             int
		YarnRel                     float64
		MoEOK, AttnOK               bool
		MoEGrads, AttnGrads         map[string]float64
		MoERouted, MoEClamped       int
		MXFP4                       string
	}
	raw := map[string]*json.RawMessage{}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &raw); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	for key, dst := range map[string]any{"names": &r.Names, "shape": &r.Shape, "windows": &r.Windows, "rel": &r.Rel,
		"rel_nosink": &r.RelNoSink, "rel_nowindow": &r.RelNoWindow, "rel_noclamp": &r.RelNoClamp, "clamped": &r.Clamped,
		"routed": &r.Routed, "yarn_rel": &r.YarnRel, "moe_ok": &r.MoEOK, "attn_ok": &r.AttnOK, "moe_grads": &r.MoEGrads,
		"attn_grads": &r.AttnGrads, "moe_routed": &r.MoERouted, "moe_clamped": &r.MoEClamped, "mxfp4": &r.MXFP4} {
		if raw[key] == nil {
			t.Fatalf("no %s in %s", key, out)
		}
		if err := json.Unmarshal(*raw[key], dst); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	t.Logf("logits %.3g relative to the reference (without sinks %.3g, without the window %.3g, without the clamp %.3g); "+
		"%d clamped values, %d experts routed; YaRN %.3g", r.Rel, r.RelNoSink, r.RelNoWindow, r.RelNoClamp, r.Clamped, r.Routed, r.YarnRel)
	if !(r.Rel <= 1e-5) {
		t.Errorf("logits differ from the reference by %.3g relative (want ≤ 1e-5)", r.Rel)
	}
	for name, v := range map[string]float64{"sinks": r.RelNoSink, "sliding window": r.RelNoWindow, "clamp": r.RelNoClamp} {
		if !(v > 1e-3) {
			t.Errorf("the reference without the %s moves by %.3g: the check cannot see it", name, v)
		}
	}
	if r.Clamped == 0 || r.Routed < 3 {
		t.Errorf("%d values clamped, %d experts routed: the fixture does not exercise the experts", r.Clamped, r.Routed)
	}
	if !(r.YarnRel <= 1e-12) {
		t.Errorf("YaRN frequencies or attention factor differ from the reference by %.3g relative", r.YarnRel)
	}
	if !slices.Equal(r.Windows, []int{5, 0}) {
		t.Errorf("windows %v, want [5 0] (sliding, full)", r.Windows)
	}
	for name, c := range map[string]struct {
		ok    bool
		grads map[string]float64
	}{"MoE block": {r.MoEOK, r.MoEGrads}, "attention": {r.AttnOK, r.AttnGrads}} {
		if !c.ok {
			t.Errorf("%s: gradcheck failed", name)
		}
		for p, g := range c.grads {
			if g == 0 {
				t.Errorf("%s: %s has no gradient", name, p)
			}
		}
		t.Logf("%s: gradcheck %v, max |grad| %v", name, c.ok, c.grads)
	}
	if _, ok := r.AttnGrads["sinks"]; !ok {
		t.Errorf("attention parameters %v: no sinks", r.AttnGrads)
	}
	if r.MoERouted < 3 || r.MoEClamped == 0 {
		t.Errorf("gradcheck fixture: %d experts routed, %d values at the clamp: want several of each", r.MoERouted, r.MoEClamped)
	}
	a, err := architecture.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range a.Tensors() {
		want = append(want, s.Name)
	}
	if !slices.Equal(r.Names, want) {
		t.Errorf("trainer's tensor names %v,\narchitecture's %v", r.Names, want)
	}
	if got, w := r.Shape, shape(t, dir); !jsonEqual(got["layers"], w["layers"]) || got["arch"] != w["arch"] {
		t.Errorf("trainer's shape %v, job's %v", got, w)
	}
	if !strings.Contains(r.MXFP4, "gate_up_proj_blocks") || !strings.Contains(r.MXFP4, "dequantize first") {
		t.Errorf("MXFP4 checkpoint: %q, want a refusal naming the block tensor and saying to dequantize", r.MXFP4)
	}
}
