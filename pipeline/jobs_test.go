package pipeline

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/importance"
)

// TestStageEngineConfig: the stages' engines and the world size are
// checked before any stage, naming the field.
func TestStageEngineConfig(t *testing.T) {
	for _, tc := range []struct {
		edit func(c *Config)
		path string
		says string
	}{
		{func(c *Config) { c.Distill.Engine = "megatron-bridge" }, "distill.engine", "written by the distill command"},
		{func(c *Config) { c.Importance.Engine = "automodel" }, "importance.engine", "want native or torch"},
		{func(c *Config) { c.Distill.Engine, c.Distill.WorldSize, c.Distill.Batch = "torch", 3, 8 }, "distill.world_size", "do not divide the batch of 8"},
		{func(c *Config) { c.Importance.Passes = 0.5 }, "importance.passes", "at least 1"},
	} {
		c := DefaultConfig()
		c.Dir, c.Budgets.MaxParams = t.TempDir(), "3M"
		tc.edit(&c)
		_, err := Execute(context.Background(), c, "", Options{})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Path != tc.path || !strings.Contains(ce.Msg, tc.says) {
			t.Errorf("got %v, want a *ConfigError at %s saying %q", err, tc.path, tc.says)
		}
	}
}

// torchTrainerReady skips unless /usr/bin/python3 imports torch.
func torchTrainerReady(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import torch").Run(); err != nil {
		t.Skip("no torch for /usr/bin/python3 (Debian: apt-get install python3-torch): the torch engine cannot run")
	}
}

// TestPipelineDistillEngineTorch: autocompress run with distill.engine
// and importance.engine torch on the embedded parent, recovery on two
// ranks over gloo: the stages ingest the jobs' scores and checkpoint and
// the run goes on through search, eval, validate, measure and the report,
// whose recovery cost names the engine and the ranks.
// It runs in -short too (CI installs Debian's python3-torch): 36 s on the
// development VM's 2 quiet cores, 2026-12-01.
func TestPipelineDistillEngineTorch(t *testing.T) {
	torchTrainerReady(t)
	dir := t.TempDir()
	c := tinyConfig(t, dir)
	c.Budgets = parentRelativeBudgets(t, c, 0.85, looseTPOT)
	c.Distill.Engine, c.Distill.WorldSize, c.Importance.Engine = "torch", 2, "torch"
	res, err := Execute(context.Background(), c, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ds distill.Summary
	if err := readJSONFile(filepath.Join(stageDir(t, res, StageDistill), DistillSummary), &ds); err != nil {
		t.Fatal(err)
	}
	if ds.Engine != "torch" || ds.WorldSize != 2 || ds.Steps < 1 || ds.TokensPerSecond <= 0 {
		t.Errorf("distill summary %+v", ds)
	}
	if _, err := os.Stat(filepath.Join(stageDir(t, res, StageDistill), ChildDir, "config.json")); err != nil {
		t.Error(err)
	}
	_, d := readReport(t, res)
	if r := d.Recovery; r == nil || r.Engine != "torch" || r.WorldSize != 2 || r.TokensPerSecond <= 0 || r.DeviceHours <= 0 {
		t.Errorf("recovery cost %+v", d.Recovery)
	}
	if d.Tokens.Importance <= 0 {
		t.Errorf("importance tokens %d: the torch scores were not taken", d.Tokens.Importance)
	}
}

// TestPipelineImportanceTorchBudget: importance.passes reaches the torch
// importance job (recipe.skip_passes), whose scores record the budget and
// cost at most it.
func TestPipelineImportanceTorchBudget(t *testing.T) {
	torchTrainerReady(t)
	c := tinyConfig(t, t.TempDir())
	c.Importance.Engine, c.Importance.Passes = "torch", 4
	c.Importance.Seqs = 16
	res, err := Execute(context.Background(), c, "", Options{Until: StageImportance})
	if err != nil {
		t.Fatal(err)
	}
	s, err := importance.Load(filepath.Join(stageDir(t, res, StageImportance), ScoresFile))
	if err != nil {
		t.Fatal(err)
	}
	if s.Budget != 4 || !(s.Passes > 1) || s.Passes > 4+1e-9 || s.SkipSequences >= 16 {
		t.Errorf("torch scores: budget %g, %.3f equivalent passes, skips on %d of 16 sequences; want the budget 4, a cost within it and fewer sequences than all", s.Budget, s.Passes, s.SkipSequences)
	}
}
