package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/servebench"
)

// tinyGptOssConfig is a gpt-oss of two layers (a sliding-window and a full
// one, sinks, biases, YaRN) of 6 stacked experts (top-2) at the embedded
// parent's vocabulary, so that its tokenizer reads the test's text.
const tinyGptOssConfig = `{"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 4096,
	"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
	"intermediate_size": 12, "num_local_experts": 6, "num_experts_per_tok": 2, "sliding_window": 8,
	"layer_types": ["sliding_attention", "full_attention"], "attention_bias": true, "rms_norm_eps": 1e-5,
	"rope_theta": 150000, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
	"truncate": false, "original_max_position_embeddings": 64}, "max_position_embeddings": 512,
	"tie_word_embeddings": false, "hidden_act": "silu", "eos_token_id": 4095, "bos_token_id": 4095}`

// TestPipelineGptOssTorch: autocompress run on a gpt-oss parent (random
// weights) with recovery in the torch reference trainer goes through every
// stage: importance scores the experts (REAP), the search removes experts
// to meet a parameter budget, prune cuts the stacked expert tensors and
// the router's rows, the torch job recovers the child, and eval, validate,
// measure and report run on it; the child loads and runs forward in the
// native engine.
func TestPipelineGptOssTorch(t *testing.T) {
	torchTrainerReady(t)
	model := randomParent(t, tinyGptOssConfig)
	c := tinyConfig(t, t.TempDir())
	c.Model = model
	// The parent: 283,828 parameters, 262,144 of them the untied embedding
	// and head; 1 expert of a layer is 1,208 and 2 layers' worth of one
	// expert and its router row 2,482: the budget takes at least 2 experts
	// (or their width) out.
	c.Budgets = Budgets{MaxParams: "0.281M"}
	c.Search.KeepLayers = []int{0, 1}
	c.Distill.Engine = "torch"
	c.Measure.Rounds = 0
	start := time.Now()
	res, err := Execute(context.Background(), c, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run: %s", time.Since(start).Round(time.Millisecond))
	for _, want := range []string{StageImportance, StageSearch, StagePrune, StageDistill, StageEval, StageValidate, StageMeasure, StageReport} {
		stageDir(t, res, want)
	}
	var sum search.Summary
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageSearch), SearchDir, search.JSONFile), &sum); err != nil {
		t.Fatal(err)
	}
	reap := false
	for _, n := range sum.Notes {
		reap = reap || strings.Contains(n, "REAP router-weighted activation norms")
	}
	if !reap {
		t.Errorf("the search's notes %q do not say it ranked experts by the importance stage's REAP scores", sum.Notes)
	}
	plan, err := prune.LoadPlan(filepath.Join(stageDir(t, res, StageSearch), SearchDir, search.PlanFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Layers) != 2 {
		t.Fatalf("plan layers %+v: want both layers kept", plan.Layers)
	}
	kept := len(plan.Layers[0].Experts)
	if kept < 2 || kept >= 6 || len(plan.Layers[1].Experts) != kept {
		t.Fatalf("plan experts %v, %v: want fewer than the parent's 6, at least the top-k 2, the same in both layers", plan.Layers[0].Experts, plan.Layers[1].Experts)
	}

	// The pruned child: config.json says the plan's expert count, and the
	// stacked expert tensors and the router are the parent's kept experts'
	// rows, in the plan's order; the sinks are the kept heads'.
	pruned := filepath.Join(stageDir(t, res, StagePrune), ChildDir)
	final := filepath.Join(stageDir(t, res, StageDistill), ChildDir)
	for _, dir := range []string{pruned, final} {
		a, err := architecture.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if a.Arch != architecture.GptOss || len(a.Layers) != 2 {
			t.Fatalf("%s: %s of %d layers, want a gpt-oss of 2", dir, a.Arch, len(a.Layers))
		}
		for i, l := range a.Layers {
			if l.MoE == nil || l.MoE.Experts != kept || l.MoE.TopK != 2 || l.Attention == nil || !l.Attention.Sinks {
				t.Errorf("%s layer %d: %+v %+v: want %d experts, top-2, sinks", dir, i, l.MoE, l.Attention, kept)
			}
		}
		if d := a.Params().Total; d > 281_000 {
			t.Errorf("%s: %d parameters, over the 0.281M budget", dir, d)
		}
	}
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(final, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["num_local_experts"] != float64(kept) || cfg["num_experts_per_tok"] != float64(2) || cfg["model_type"] != "gpt_oss" {
		t.Errorf("child config.json %s: want num_local_experts %d, num_experts_per_tok 2, model_type gpt_oss", b, kept)
	}
	pr, err := checkpoint.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cr, err := checkpoint.Open(pruned)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	heads := len(plan.Layers[0].Heads)
	for l, lp := range plan.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		for _, x := range []struct {
			name string
			row  int // elements per expert (or router row)
		}{{"mlp.experts.gate_up_proj", 32 * 24}, {"mlp.experts.gate_up_proj_bias", 24},
			{"mlp.experts.down_proj", 12 * 32}, {"mlp.experts.down_proj_bias", 32},
			{"mlp.router.weight", 32}, {"mlp.router.bias", 1}} {
			info, ok := cr.Tensor(p + x.name)
			if !ok || info.Shape[0] != int64(kept) {
				t.Fatalf("child %s%s: %+v, want %d rows", p, x.name, info, kept)
			}
			pv, err := pr.Float32(p + x.name)
			if err != nil {
				t.Fatal(err)
			}
			cv, err := cr.Float32(p + x.name)
			if err != nil {
				t.Fatal(err)
			}
			for j, e := range lp.Experts {
				if !slices.Equal(cv[j*x.row:(j+1)*x.row], pv[e*x.row:(e+1)*x.row]) {
					t.Errorf("child %s%s row %d is not the parent's expert %d", p, x.name, j, e)
				}
			}
		}
		sv, err := cr.Float32(p + "self_attn.sinks")
		if err != nil {
			t.Fatal(err)
		}
		pv, err := pr.Float32(p + "self_attn.sinks")
		if err != nil {
			t.Fatal(err)
		}
		if heads == 0 && !slices.Equal(sv, pv) || heads > 0 && len(sv) != heads {
			t.Errorf("child %sself_attn.sinks %v (kept heads %v), parent %v", p, sv, lp.Heads, pv)
		}
	}

	// The torch job recovered it; its held-out loss is recorded, before
	// and after.
	var ds distill.Summary
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageDistill), DistillSummary), &ds); err != nil {
		t.Fatal(err)
	}
	if ds.Engine != "torch" || ds.Steps < 1 || ds.Tokens <= 0 || ds.After == nil || math.IsNaN(ds.After.Loss) || math.IsInf(ds.After.Loss, 0) {
		t.Errorf("distill summary %+v: want a torch recovery with a finite held-out loss", ds)
	}
	_, d := readReport(t, res)
	if n := len(d.HeldOut); n < 2 || d.HeldOut[0].Step != 0 || d.HeldOut[n-1].Tokens != ds.Tokens {
		t.Errorf("held-out points %+v: want before and after, the last at the %d tokens of recovery", d.HeldOut, ds.Tokens)
	}
	for _, h := range d.HeldOut {
		if math.IsNaN(h.Loss) || math.IsInf(h.Loss, 0) || h.Loss <= 0 {
			t.Errorf("held-out point %+v: not a finite loss", h)
		}
	}
	if len(d.HeldOut) > 0 {
		t.Logf("torch recovery: held-out loss %.4f → %.4f in %d steps", d.HeldOut[0].Loss, d.HeldOut[len(d.HeldOut)-1].Loss, ds.Steps)
	}
	if d.Recovery == nil || d.Recovery.Engine != "torch" {
		t.Errorf("recovery cost %+v", d.Recovery)
	}
	if len(d.Child.Layers) != 2 || d.Child.Params > 281_000 || d.Child.Params >= d.Parent.Params {
		t.Errorf("report child %+v (%d parameters, parent %d): want 2 layers, at most 0.281M", d.Child.Layers, d.Child.Params, d.Parent.Params)
	}
	if len(d.Budgets) != 1 || d.Budgets[0].Name != "params" || d.Budgets[0].Measured == nil || !d.Budgets[0].Counted ||
		math.Abs(*d.Budgets[0].Measured-float64(d.Child.Params)*1e-6) > 1e-9 || !d.Budgets[0].Met(*d.Budgets[0].Measured) {
		t.Errorf("budgets %+v: want the params budget counted from the child (%d parameters) and met", d.Budgets, d.Child.Params)
	}
	var inv servebench.Invocations
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageMeasure), MeasureFile), &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.Reports) != c.Measure.Invocations || inv.Summary["tpot_mean_s"].Worst <= 0 {
		t.Errorf("%d invocations measured (want %d), TPOT %+v", len(inv.Reports), c.Measure.Invocations, inv.Summary["tpot_mean_s"])
	}

	// autocompress validate: the child loads in the engines that serve
	// gpt-oss (both layers kept, so its windows stay on the even layer
	// vLLM windows), and the validate stage checked the serve-on engine.
	var vr export.Report
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageValidate), ValidateFile), &vr); err != nil {
		t.Fatal(err)
	}
	if vr.Arch != architecture.GptOss || len(vr.Violations) != 0 {
		t.Errorf("validate stage %+v: want the gpt-oss child passed", vr)
	}
	for _, e := range []string{"vllm", "sglang", "native"} {
		rep, err := export.ValidateDir(final, e)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() {
			t.Errorf("validate %s: %v", e, rep.Err())
		}
	}
	// The final child loads in the native engine and runs forward.
	m, err := engine.Load(final)
	if err != nil {
		t.Fatal(err)
	}
	logits, err := m.Forward([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(logits) != 10*4096 {
		t.Fatalf("%d logits, want 10 rows of 4096", len(logits))
	}
	for _, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("the child's forward gives a non-finite logit")
		}
	}
}
