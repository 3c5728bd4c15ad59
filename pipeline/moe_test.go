package pipeline

import (
	"context"
	"github.com/autocompress/autocompress/checkpoint/testutil"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/search"
)

// TestPipelineMoEExpertScores: on an MoE parent the importance stage also
// scores the routed experts (REAP, on its calibration rows, with the
// scores' provenance), and the search ranks experts by them rather than
// by the structural prior of the weights.
func TestPipelineMoEExpertScores(t *testing.T) {
	model := randomParent(t, testutil.TinyQwen3MoEConfig)
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

// TestPipelineMoEMinitronNative: the Minitron++ baseline on an MoE parent
// with native recovery (distill.engine native, which resolve refused while
// the engine could not train MoE layers): the search trains its top-k
// candidates briefly in the native engine (search/trained) and the
// recovery distils the chosen child natively, its held-out loss falling.
func TestPipelineMoEMinitronNative(t *testing.T) {
	model := randomParent(t, testutil.TinyQwen3MoEConfig)
	c := tinyConfig(t, t.TempDir())
	c.Model = model
	c.Budgets = Budgets{MaxParams: "0.45M"} // the parent: 0.49M, 0.26M of them the embedding
	c.Search.Strategy = "minitron"
	c.Search.TopKTrainTokens = 2 * 2 * 32
	c.Distill.Engine = "native"
	// The parent's random weights predict nearly uniformly: cross-entropy
	// on the data is what lowers the held-out loss in a few steps.
	c.Distill.Tokens, c.Distill.CEWeight, c.Distill.LR = 8*2*32, 1, 1e-2
	res, err := Execute(context.Background(), c, "", Options{Until: StageDistill})
	if err != nil {
		t.Fatal(err)
	}
	var sum search.Summary
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageSearch), SearchDir, search.JSONFile), &sum); err != nil {
		t.Fatal(err)
	}
	trained := false
	for _, n := range sum.Notes {
		if strings.Contains(n, "tokens of distillation from the parent") {
			trained = true
			t.Logf("search: %s", n)
		}
	}
	if !trained {
		t.Errorf("the search's notes %q do not say it ranked its top-k after brief distillation", sum.Notes)
	}
	var ds distill.Summary
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageDistill), DistillSummary), &ds); err != nil {
		t.Fatal(err)
	}
	if ds.Engine != "" || ds.Steps < 1 || ds.Before == nil || ds.After == nil || !(ds.After.Loss < ds.Before.Loss) {
		t.Errorf("distill summary %+v: want a native recovery whose held-out loss falls", ds)
	}
	if ds.Before != nil && ds.After != nil {
		t.Logf("native MoE recovery: held-out loss %.4f → %.4f in %d steps", ds.Before.Loss, ds.After.Loss, ds.Steps)
	}
}
