package pipeline

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/search"
)

// tinyMoEConfig is a Qwen3-MoE of two layers of 8 experts (top-2) at the
// embedded parent's vocabulary, so that its tokenizer reads the test's
// text.
const tinyMoEConfig = `{"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
	"vocab_size": 4096, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
	"num_key_value_heads": 1, "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
	"moe_intermediate_size": 64, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [],
	"hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000, "tie_word_embeddings": true,
	"max_position_embeddings": 512, "eos_token_id": 4095, "bos_token_id": 4095}`

// TestPipelineMoEExpertScores: on an MoE parent the importance stage also
// scores the routed experts (REAP, on its calibration rows, with the
// scores' provenance), and the search ranks experts by them rather than
// by the structural prior of the weights.
func TestPipelineMoEExpertScores(t *testing.T) {
	model := randomParent(t, tinyMoEConfig)
	c := tinyConfig(t, t.TempDir())
	c.Model = model
	c.Budgets = Budgets{MaxParams: "0.6M"}
	c.Search.KeepLayers = []int{0, 1}
	c.Search.ProxyRows = 0
	c.Distill.Engine = "torch" // validated only: the run stops after the search
	res, err := Execute(context.Background(), c, "", Options{Until: StageSearch})
	if err != nil {
		t.Fatal(err)
	}
	es, err := importance.LoadExperts(filepath.Join(stageDir(t, res, StageImportance), ExpertsFile))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := importance.Load(filepath.Join(stageDir(t, res, StageImportance), ScoresFile))
	if err != nil {
		t.Fatal(err)
	}
	if es.Kind != importance.ExpertREAP || es.ModelHash != sc.ModelHash || es.DataHash != sc.DataHash || len(es.Layers) != 2 || len(es.Layers[0]) != 8 {
		t.Fatalf("expert scores %+v: want REAP for both layers' 8 experts, with the scores' hashes", es)
	}
	var sum search.Summary
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageSearch), SearchDir, search.JSONFile), &sum); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range sum.Notes {
		found = found || strings.Contains(n, "REAP router-weighted activation norms")
	}
	if !found {
		t.Errorf("the search's notes %q do not say it ranked experts by the importance stage's REAP scores", sum.Notes)
	}
}
