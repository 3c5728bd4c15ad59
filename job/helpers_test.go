package job

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func seq(n, step int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i * step
	}
	return s
}

// parentDir is the embedded parent's checkpoint.
func parentDir(t *testing.T) string {
	t.Helper()
	d, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var (
	childMu   sync.Mutex
	childDirs = map[string]string{}
	childRoot string
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if childRoot != "" {
		os.RemoveAll(childRoot)
	}
	os.Exit(code)
}

// child prunes the embedded parent: hidden 192 → 128, FFN 512 → 256,
// layers 3 and 5 removed; decilm keeps every neuron of the odd layers
// (per-layer widths). Each format is pruned once per process: treat the
// directory as read-only.
func child(t *testing.T, format string) string {
	t.Helper()
	childMu.Lock()
	defer childMu.Unlock()
	if d, ok := childDirs[format]; ok {
		return d
	}
	if childRoot == "" {
		d, err := os.MkdirTemp("", "job-test-children-")
		if err != nil {
			t.Fatal(err)
		}
		childRoot = d
	}
	plan := &prune.Plan{Version: 1, Hidden: seq(128, 1), OutputFormat: format}
	for l := range 8 {
		lp := prune.LayerPlan{Layer: l, Neurons: seq(256, 2)}
		switch {
		case l == 3 || l == 5:
			lp = prune.LayerPlan{Layer: l, Remove: true}
		case format == prune.FormatDeciLM && l%2 == 1:
			lp.Neurons = seq(512, 1)
		}
		plan.Layers = append(plan.Layers, lp)
	}
	out := filepath.Join(childRoot, "child-"+format)
	if _, err := prune.Prune(context.Background(), prune.Options{Model: parentDir(t), Plan: plan, Out: out}); err != nil {
		t.Fatal(err)
	}
	childDirs[format] = out
	return out
}

// distillConfig is a small distill job of student from the parent.
func distillConfig(t *testing.T, engine, student string) EmitConfig {
	t.Helper()
	return EmitConfig{
		Kind: Distill, Engine: engine, Dir: filepath.Join(t.TempDir(), "job"),
		Teacher: parentDir(t), Student: student,
		Data: []string{"parent:train-sample"}, EvalData: []string{"parent:test"},
		Recipe:    Recipe{Tokens: 4 * 4 * 32, SeqLen: 32, Batch: 4, LR: 2e-3, Seed: 3, EvalRows: 8, Temperature: 1, KDWeight: 1, CEWeight: 0.2},
		WorldSize: 2, CheckpointEvery: 2,
	}
}

func emit(t *testing.T, c EmitConfig) *Emitted {
	t.Helper()
	e, err := Emit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
