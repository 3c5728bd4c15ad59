package conventions

import (
	"strings"
	"testing"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/eval"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/proxy"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/search"
	"github.com/autocompress/autocompress/servebench"
	"github.com/autocompress/autocompress/tokenizer"
	"github.com/autocompress/autocompress/train"
	"github.com/autocompress/autocompress/workload"
)

// TestValidateErrors: each options struct's Validate refuses what is
// invalid with an error that names the option (never a command-line flag),
// after EnsureDefaults where the struct has defaults.
func TestValidateErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string // the option, as the error names it
	}{
		{"servebench repeats", (&servebench.Options{Repeats: -1}).EnsureDefaults().Validate(), "repeats -1"},
		{"servebench warm-up", (&servebench.Options{MaxWarmup: 1}).EnsureDefaults().Validate(), "max warm-up 1"},
		{"servebench prefill", (&servebench.Options{PrefillTokens: -3}).EnsureDefaults().Validate(), "prefill tokens -3"},
		{"servebench sequences", (&servebench.Options{MaxNumSeqs: -1}).EnsureDefaults().Validate(), "max sequences -1"},
		{"proxy batch", (&proxy.Options{Batch: -2}).EnsureDefaults().Validate(), "batch -2"},
		{"proxy reference bytes", (&proxy.Options{MaxReferenceBytes: -1}).EnsureDefaults().Validate(), "MaxReferenceBytes -1"},
		{"importance batch", (&importance.Options{Batch: -1}).EnsureDefaults().Validate(), "batch -1"},
		{"importance skip rows", (&importance.Options{SkipRows: -1}).EnsureDefaults().Validate(), "skip rows -1"},
		{"eval window", (&eval.Options{SeqLen: -1}).EnsureDefaults().Validate(), "window length -1"},
		{"eval stride", (&eval.Options{Stride: -1}).EnsureDefaults().Validate(), "stride -1"},
		{"eval batch", (&eval.Options{Batch: -1}).EnsureDefaults().Validate(), "batch -1"},
		{"eval task limit", (&eval.TaskOptions{Limit: -1}).Validate(), "limit -1"},
		{"eval config empty", (&eval.Config{}).EnsureDefaults().Validate(), "nothing to measure"},
		{"eval config limit", (&eval.Config{Tasks: []*eval.Task{{}}, Limit: -1}).EnsureDefaults().Validate(), "limit -1"},
		{"eval suite choices", (&eval.SuiteOptions{Choices: 1}).EnsureDefaults().Validate(), "choices 1"},
		{"eval suite items", (&eval.SuiteOptions{Cloze: -1}).EnsureDefaults().Validate(), "-1 cloze"},
		{"eval suite context", (&eval.SuiteOptions{ContextWords: -1}).EnsureDefaults().Validate(), "context words -1"},
		{"eval suite not completed", (&eval.SuiteOptions{}).Validate(), "EnsureDefaults"},
		{"dataset sequence length", (&dataset.PackOptions{}).Validate(), "sequence length 0"},
		{"dataset rows", (&dataset.PackOptions{SeqLen: 8, MaxRows: -1}).Validate(), "max rows -1"},
		{"dataset positions", (&dataset.Options{PackOptions: dataset.PackOptions{SeqLen: 8}, MaxPositions: -1}).Validate(), "max positions -1"},
		{"tokenizer merges", (&tokenizer.BPETrainOptions{Merges: -5}).EnsureDefaults().Validate(), "-5 merges"},
		{"tokenizer frequency", (&tokenizer.BPETrainOptions{MinFrequency: -1}).EnsureDefaults().Validate(), "minimum frequency -1"},
		{"export TP", (&export.Options{TP: -2}).Validate(), "tensor-parallel size -2"},
		{"prune plan", (&prune.Options{Model: "m", Out: "o"}).Validate(), "no plan"},
		{"prune out", (&prune.Options{Model: "m", Plan: &prune.Plan{}}).Validate(), "no output directory"},
		{"prune TP", (&prune.Options{Model: "m", Out: "o", Plan: &prune.Plan{}, TP: -1}).Validate(), "tensor-parallel size -1"},
		{"engine max tokens", (&engine.GenerateOptions{}).Validate(), "max tokens 0"},
		{"engine temperature", (&engine.GenerateOptions{MaxTokens: 1, Temperature: -1}).Validate(), "temperature -1"},
		{"engine top-p", (&engine.GenerateOptions{MaxTokens: 1, TopP: 2}).Validate(), "top-p 2"},
		{"engine concurrency", (&engine.ServeOptions{Concurrency: -1}).EnsureDefaults().Validate(), "concurrency -1"},
		{"engine max batch", (&engine.ServeOptions{MaxBatch: -1}).EnsureDefaults().Validate(), "max batch -1"},
		{"engine prefill", (&engine.ServeOptions{PrefillTokens: -1}).EnsureDefaults().Validate(), "prefill tokens -1"},
		{"search GPU", (&search.Options{}).EnsureDefaults().Validate(), "a GPU and a workload"},
		{"search top-k", (&search.Options{GPU: &hardware.GPU{}, Workload: &workload.Workload{}, TopK: -1}).EnsureDefaults().Validate(), "top-k -1"},
		{"search close fraction", (&search.Options{GPU: &hardware.GPU{}, Workload: &workload.Workload{}, CloseFraction: search.Ptr(-0.1)}).EnsureDefaults().Validate(), "close fraction -0.1"},
		{"search evaluations", (&search.Options{GPU: &hardware.GPU{}, Workload: &workload.Workload{}, MaxEvaluations: -1}).EnsureDefaults().Validate(), "max evaluations -1"},
		{"space TP", (&search.SpaceOptions{TP: -1}).EnsureDefaults().Validate(), "tensor-parallel size -1"},
		{"space min width", (&search.SpaceOptions{MinWidth: 1.5}).EnsureDefaults().Validate(), "min width 1.5"},
		{"space max depth", (&search.SpaceOptions{MaxDepth: search.Ptr(1.0)}).EnsureDefaults().Validate(), "max depth 1"},
		{"space uniform depth", (&search.SpaceOptions{Uniform: true, MaxDepth: search.Ptr(0.2)}).EnsureDefaults().Validate(), "uniform space keeps every layer"},
		{"space memory fraction", (&search.SpaceOptions{MemFraction: 2}).EnsureDefaults().Validate(), "memory fraction 2"},
		{"space sequences", (&search.SpaceOptions{MaxNumSeqs: -1}).EnsureDefaults().Validate(), "max sequences -1"},
		{"trained proxy tokens", (&search.TrainOptions{Tokens: -1}).EnsureDefaults().Validate(), "tokens -1"},
		{"trained proxy temperature", (&search.TrainOptions{Temperature: -1}).EnsureDefaults().Validate(), "temperature -1"},
		{"trained proxy weights", (&search.TrainOptions{KDWeight: -1, CEWeight: 1}).EnsureDefaults().Validate(), "KD weight -1"},
		{"trained proxy cache", (&search.TrainOptions{CacheK: -1}).EnsureDefaults().Validate(), "cache k -1"},
		{"train steps", (&train.Options{Steps: -1}).EnsureDefaults().Validate(), "steps -1"},
		{"train weight decay", (&train.Options{WeightDecay: train.Ptr(-1.0)}).EnsureDefaults().Validate(), "weight decay -1"},
		{"distill data", (&distill.Config{Teacher: "t", Student: "s", Out: "o"}).EnsureDefaults().Validate(), "no training data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatalf("no error, want one naming %q", tc.want)
			}
			if msg := tc.err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "--") {
				t.Errorf("error %q: want it to name %q and no command-line flag", msg, tc.want)
			}
		})
	}
}

// TestDefaultsValidate: an options struct left at its zero value (but for
// what has no default) validates once EnsureDefaults has filled it.
func TestDefaultsValidate(t *testing.T) {
	for name, err := range map[string]error{
		"servebench": (&servebench.Options{}).EnsureDefaults().Validate(),
		"proxy":      (&proxy.Options{}).EnsureDefaults().Validate(),
		"importance": (&importance.Options{}).EnsureDefaults().Validate(),
		"eval":       (&eval.Options{}).EnsureDefaults().Validate(),
		"eval task":  (&eval.TaskOptions{}).Validate(),
		"suite":      (&eval.SuiteOptions{}).EnsureDefaults().Validate(),
		"tokenizer":  (&tokenizer.BPETrainOptions{}).EnsureDefaults().Validate(),
		"export":     (&export.Options{}).Validate(),
		"serve":      (&engine.ServeOptions{}).EnsureDefaults().Validate(),
		"generate":   (&engine.GenerateOptions{MaxTokens: 1}).Validate(),
		"search":     (&search.Options{GPU: &hardware.GPU{}, Workload: &workload.Workload{}}).EnsureDefaults().Validate(),
		"space":      (&search.SpaceOptions{}).EnsureDefaults().Validate(),
		"uniform":    (&search.SpaceOptions{Uniform: true}).EnsureDefaults().Validate(),
		"trained":    (&search.TrainOptions{}).EnsureDefaults().Validate(),
		"train":      (&train.Options{}).EnsureDefaults().Validate(),
		"dataset":    (&dataset.Options{PackOptions: dataset.PackOptions{SeqLen: 8}}).Validate(),
	} {
		if err != nil {
			t.Errorf("%s: the defaults do not validate: %v", name, err)
		}
	}
}

// TestExplicitZeroMeansZero: where 0 is a valid value, EnsureDefaults keeps
// an explicit 0 (a pointer to 0) and fills only what is unset.
func TestExplicitZeroMeansZero(t *testing.T) {
	seed := uint64(0)
	suite := (&eval.SuiteOptions{Seed: &seed}).EnsureDefaults()
	space := (&search.SpaceOptions{MaxDepth: search.Ptr(0.0)}).EnsureDefaults()
	opts := (&search.Options{CloseFraction: search.Ptr(0.0)}).EnsureDefaults()
	tr := (&train.Options{WeightDecay: train.Ptr(0.0), Warmup: train.Ptr(0), MinLR: train.Ptr(0.0), Clip: train.Ptr(0.0)}).EnsureDefaults()
	dc := (&distill.Config{CEWeight: train.Ptr(0.0), KDWeight: train.Ptr(0.0)}).EnsureDefaults()
	sb := (&servebench.Options{}).EnsureDefaults()
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"eval suite seed", float64(*suite.Seed), 0},
		{"search space max depth", *space.MaxDepth, 0},
		{"search close fraction", *opts.CloseFraction, 0},
		{"train weight decay", *tr.WeightDecay, 0},
		{"train warm-up", float64(*tr.Warmup), 0},
		{"train min LR", *tr.MinLR, 0},
		{"train clip", *tr.Clip, 0},
		{"distill KD weight", *dc.KDWeight, 0},
		{"servebench max sequences (0: one per client)", float64(sb.MaxNumSeqs), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %g after EnsureDefaults, want the explicit %g", c.name, c.got, c.want)
		}
	}
	// Unset, they take the defaults.
	if d := (&eval.SuiteOptions{}).EnsureDefaults(); *d.Seed != 1 {
		t.Errorf("unset suite seed %d, want 1", *d.Seed)
	}
	if d := (&search.SpaceOptions{}).EnsureDefaults(); *d.MaxDepth != 0.5 {
		t.Errorf("unset max depth %g, want 0.5", *d.MaxDepth)
	}
	if d := (&search.Options{}).EnsureDefaults(); *d.CloseFraction != 0.03 {
		t.Errorf("unset close fraction %g, want 0.03", *d.CloseFraction)
	}
}
