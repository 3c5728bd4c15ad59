package eval

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/tokenizer"
)

// parentChild loads the embedded parent and a child pruned from it with
// prune's library (hidden 192 → 160, MLP 512 → 256 in every layer: 58 % of
// the parameters, no recovery training), with their tokenizer.
func parentChild(t *testing.T) (p, c *engine.Model, tok *tokenizer.Tokenizer) {
	t.Helper()
	dir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	if p, err = engine.Load(dir); err != nil {
		t.Fatal(err)
	}
	plan := &prune.Plan{Version: prune.PlanVersion}
	for i := range 160 {
		plan.Hidden = append(plan.Hidden, i)
	}
	var neurons []int
	for i := range 256 {
		neurons = append(neurons, i)
	}
	for l := range p.Arch().Layers {
		plan.Layers = append(plan.Layers, prune.LayerPlan{Layer: l, Neurons: neurons})
	}
	out := filepath.Join(t.TempDir(), "child")
	if _, err := prune.Prune(context.Background(), prune.Options{Model: dir, Plan: plan, Out: out}); err != nil {
		t.Fatal(err)
	}
	if c, err = engine.Load(out); err != nil {
		t.Fatal(err)
	}
	if tok, err = tokenizer.Load(filepath.Join(out, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	return p, c, tok
}

// TestSuiteParentAndChild runs the suite on the embedded parent and a
// pruned child: perplexity on the parent's test split, an in-domain suite
// built from it, and (without -short, when ../shared/data is there) the
// public tasks with a small --limit. The parent must beat the unrecovered
// child where the measurement can tell them apart: perplexity on text and
// on the cloze words, summed over many tokens.
func TestSuiteParentAndChild(t *testing.T) {
	root, _ := shareddata.ModuleRoot()
	text, err := parent.SplitText(root, "test")
	if errors.Is(err, corpus.ErrMissing) {
		t.Skipf("corpus absent (scripts/fetch-assets.sh): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	p, c, tok := parentChild(t)
	if r := float64(c.NumParams()) / float64(p.NumParams()); r < 0.5 || r > 0.65 {
		t.Fatalf("child has %.0f%% of the parent's parameters", 100*r)
	}
	textBytes, items, limit := 100_000, 100, 40
	if testing.Short() {
		textBytes, items, limit = 6_000, 24, 24
	}
	suite, err := BuildSuite(text, SuiteOptions{Cloze: items, Choice: items})
	if err != nil {
		t.Fatal(err)
	}
	tasks := suiteTasks(t, suite)
	if !testing.Short() {
		for _, tc := range [][2]string{{"lambada", "eval/lambada_openai_test.jsonl"}, {"hellaswag", "eval/hellaswag_val_full.txt.bz2"},
			{"piqa", "eval/piqa_valid.jsonl"}, {"mmlu", "eval/mmlu"}} {
			if path, ok := shareddata.Path(tc[1]); ok {
				ts, err := LoadTask(tc[0], path)
				if err != nil {
					t.Fatal(err)
				}
				if tc[0] == "mmlu" { // 5-shot prompts fill the 512 positions: one question per subject
					ts[0] = ts[0].Limit(1)
				}
				tasks = append(tasks, ts...)
			} else {
				t.Logf("%s absent: not run", tc[1])
			}
		}
	}
	data := &Data{Name: "parent:test", Text: []byte(truncUTF8(text, textBytes))}
	rep, err := Run(context.Background(), []Model{{"parent", p, tok}, {"child", c, tok}},
		Config{Data: []*Data{data}, Windows: Options{SeqLen: 128, Batch: 16}, Tasks: tasks, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	t.Logf("%.0f s (loaded machine)\n%s", time.Since(t0).Seconds(), b.String())
	pr, cr := rep.Models[0], rep.Models[1]
	if pr.Perplexity >= cr.Perplexity {
		t.Errorf("parent perplexity %.1f, unrecovered child %.1f", pr.Perplexity, cr.Perplexity)
	}
	pc, _ := pr.Tasks[0].Metric("perplexity")
	cc, _ := cr.Tasks[0].Metric("perplexity")
	if pr.Tasks[0].Task != "suite/cloze" || pc.Value >= cc.Value {
		t.Errorf("%s: parent cloze-word perplexity %.1f, child %.1f", pr.Tasks[0].Task, pc.Value, cc.Value)
	}
	for _, m := range rep.Models {
		for _, tr := range m.Tasks {
			for _, met := range tr.Metrics {
				if math.IsNaN(met.Value) || math.IsInf(met.Value, 0) || met.Stderr < 0 {
					t.Errorf("%s %s %s: %+v", m.Model, tr.Task, met.Name, met)
				}
			}
		}
	}
	// The parent picks the true continuation of its own kind of text more
	// often than chance, by more than two standard errors.
	if acc, _ := pr.Tasks[1].Metric("acc"); acc.Value <= pr.Tasks[1].Chance+2*acc.Stderr && !testing.Short() {
		t.Errorf("parent on in-domain choice: %.3f ± %.3f, chance %.2f", acc.Value, acc.Stderr, pr.Tasks[1].Chance)
	}
}

func suiteTasks(t *testing.T, items []SuiteItem) []*Task {
	var b bytes.Buffer
	if err := WriteSuite(&b, items); err != nil {
		t.Fatal(err)
	}
	ts, err := ParseSuite("suite.jsonl", &b)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func truncUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// TestSuiteContinuationLength measures the figures of BuildSuite's doc
// comment (run with -v): the choice questions of the default suite cut from
// the parent's test split, with 3- and 12-word continuations, for the
// parent and parentChild's unrecovered child. It asserts what the doc
// relies on: the parent well above chance at both lengths and ahead of
// the child.
func TestSuiteContinuationLength(t *testing.T) {
	if testing.Short() {
		t.Skip("about 25 s of forward passes")
	}
	root, _ := shareddata.ModuleRoot()
	text, err := parent.SplitText(root, "test")
	if err != nil {
		t.Fatal(err)
	}
	p, c, tok := parentChild(t)
	for _, words := range []int{3, 12} {
		suite, err := BuildSuite(text, SuiteOptions{ContWords: words})
		if err != nil {
			t.Fatal(err)
		}
		var choice []SuiteItem
		for _, it := range suite {
			if it.Kind == "choice" {
				choice = append(choice, it)
			}
		}
		rep, err := Run(context.Background(), []Model{{"parent", p, tok}, {"child", c, tok}},
			Config{Tasks: suiteTasks(t, choice), Windows: Options{SeqLen: 128, Batch: 16}})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		rep.WriteText(&b)
		t.Logf("%d-word continuations, %d questions\n%s", words, len(choice), b.String())
		pa, _ := rep.Models[0].Tasks[0].Metric("acc")
		ca, _ := rep.Models[1].Tasks[0].Metric("acc")
		if pa.Value < 0.25+3*pa.Stderr || pa.Value <= ca.Value {
			t.Errorf("%d words: parent acc %.3f ± %.3f, child %.3f; want the parent above chance (0.25) and the child", words, pa.Value, pa.Stderr, ca.Value)
		}
	}
}
