package pipeline

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/servebench"
)

// tinyHybridConfig is a Nemotron-H of four layers (Mamba2, attention,
// Mamba2, MLP) at the embedded parent's vocabulary, so that its tokenizer
// reads the test's text.
const tinyHybridConfig = `{"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
	"vocab_size": 4096, "hidden_size": 64, "hybrid_override_pattern": "M*M-", "num_hidden_layers": 4,
	"num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128,
	"mlp_hidden_act": "relu2", "mamba_num_heads": 4, "mamba_head_dim": 16, "ssm_state_size": 16,
	"n_groups": 2, "conv_kernel": 4, "use_conv_bias": true, "use_bias": false, "chunk_size": 128,
	"layer_norm_epsilon": 1e-5, "tie_word_embeddings": true, "max_position_embeddings": 512,
	"eos_token_id": 4095, "bos_token_id": 4095}`

// randomParent writes a bf16 random-weight checkpoint of config (a
// config.json at the embedded parent's vocabulary) with the embedded
// parent's tokenizer, and returns its directory.
func randomParent(t *testing.T, config string) string {
	t.Helper()
	a, err := architecture.FromConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(t.TempDir(), "parent")
	if err := engine.Init(context.Background(), a, model, engine.InitOptions{Seed: 1, DType: checkpoint.BF16}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(moduleRoot(t), "parent", "model", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(model, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return model
}

// TestPipelineHybridTorch: autocompress run on a hybrid Mamba2 parent
// (random weights) with recovery in the torch reference trainer goes
// through every stage: the search finds a child for the native engine on
// this CPU (it refused every hybrid shape while the native engine's load
// rules said it had no Mamba2 mixer), the torch job recovers it, eval,
// validate and measure run, and the report shows the Mamba2 widths of
// parent and child and the recovery's held-out points with their tokens.
func TestPipelineHybridTorch(t *testing.T) {
	torchTrainerReady(t)
	model := randomParent(t, tinyHybridConfig)
	c := tinyConfig(t, t.TempDir())
	c.Model = model
	c.Budgets = Budgets{MaxParams: "0.45M"} // the parent: 0.57M, 0.26M of them the embedding
	c.Search.KeepLayers = []int{0, 1, 2, 3}
	c.Distill.Engine = "torch"
	c.Measure.Rounds = 0
	res, err := Execute(context.Background(), c, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ds distill.Summary
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageDistill), DistillSummary), &ds); err != nil {
		t.Fatal(err)
	}
	if ds.Engine != "torch" || ds.Steps < 1 || ds.Tokens <= 0 {
		t.Errorf("distill summary %+v: want a torch recovery", ds)
	}
	_, d := readReport(t, res)
	if len(d.Parent.Layers) != 4 || d.Parent.Layers[0].MambaHeads != 4 || d.Parent.Layers[0].MambaHeadDim != 16 || d.Parent.Layers[1].MambaHeads != 0 {
		t.Errorf("parent shape %+v: want the Mamba2 widths of layers 0 and 2 only", d.Parent.Layers)
	}
	if len(d.Child.Layers) != 4 || d.Child.Layers[2].MambaHeads == 0 || d.Child.Params > 450_000 {
		t.Errorf("child shape %+v (%d parameters): want every layer kept, its Mamba2 mixers with heads, at most 0.45M", d.Child.Layers, d.Child.Params)
	}
	// The parameter budget is judged on the written child's count, not an
	// estimate.
	if len(d.Budgets) != 1 || d.Budgets[0].Name != "params" || d.Budgets[0].Measured == nil || !d.Budgets[0].Counted ||
		math.Abs(*d.Budgets[0].Measured-float64(d.Child.Params)*1e-6) > 1e-9 || !d.Budgets[0].Met(*d.Budgets[0].Measured) {
		t.Errorf("budgets %+v: want the params budget counted from the child (%d parameters) and met", d.Budgets, d.Child.Params)
	}
	if n := len(d.HeldOut); n < 2 || d.HeldOut[0].Step != 0 || d.HeldOut[n-1].Tokens != ds.Tokens {
		t.Errorf("held-out points %+v: want before and after, the last at the %d tokens of recovery", d.HeldOut, ds.Tokens)
	}
	for _, sr := range res.Stages {
		if sr.Name == StageDistill {
			t.Logf("distill stage: %.1f CPU-s, peak RSS %d B", sr.CPUSeconds, sr.PeakRSSBytes)
			// torch's import alone takes a second or more of CPU and over 150 MB;
			// this process's share of the stage is a fraction of either.
			if sr.CPUSeconds < 1 || runtime.GOOS == "linux" && sr.PeakRSSBytes < 150<<20 {
				t.Errorf("distill stage: %.1f CPU-s, peak RSS %d B: the torch job's processes are not counted", sr.CPUSeconds, sr.PeakRSSBytes)
			}
		}
	}
	if d.Recovery == nil || d.Recovery.Engine != "torch" {
		t.Errorf("recovery cost %+v", d.Recovery)
	}
	var inv servebench.Invocations
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageMeasure), MeasureFile), &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.Reports) != c.Measure.Invocations || inv.Summary["tpot_mean_s"].Worst <= 0 {
		t.Errorf("%d invocations measured (want %d), TPOT %+v", len(inv.Reports), c.Measure.Invocations, inv.Summary["tpot_mean_s"])
	}
}
