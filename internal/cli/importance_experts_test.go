package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/importance"
)

// TestImportanceExpertScores: importance on an MoE checkpoint with
// --expert-scores-out writes REAP (or frequency) scores in the format
// prune --expert-scores reads, which prune then uses; a dense model or a
// kind without the file is a usage error.
func TestImportanceExpertScores(t *testing.T) {
	parent := mixtralParent(t)
	dir := t.TempDir()
	var ids []string
	for i := range 400 {
		ids = append(ids, strconv.Itoa((i*7+i*i/3)%32))
	}
	data := filepath.Join(dir, "calib.ids")
	if err := os.WriteFile(data, []byte(strings.Join(ids, " ")), 0o666); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{importance.ExpertREAP, importance.ExpertFrequency} {
		experts := filepath.Join(dir, kind+".safetensors")
		code, _, errs := evalRun("importance", "--model", parent, "--data", data, "--ids", "--out", filepath.Join(dir, kind+"-scores.safetensors"),
			"--seqs", "4", "--seq-len", "16", "--no-skip-loss", "--expert-scores-out", experts, "--expert-kind", kind)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", kind, code, errs)
		}
		es, err := importance.LoadExperts(experts)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := importance.HashModelDir(parent)
		if es.Kind != kind || es.Tokens != 64 || es.ModelHash != h || len(es.Layers) != 2 || len(es.Layers[1]) != 4 || !strings.Contains(errs, "expert scores:") {
			t.Errorf("%s: scores %+v, stderr %s", kind, es, errs)
		}
		var sum float64
		for _, v := range es.Layers[0] {
			sum += v
		}
		if kind == importance.ExpertFrequency && (sum < 1.999 || sum > 2.001) {
			t.Errorf("frequencies of layer 0 sum to %v, want the top-k 2", sum)
		}
		if code, _, errs := pruneRunCLI("prune", "--model", parent, "--keep-experts", "2", "--expert-scores", experts, "--out", filepath.Join(dir, kind+"-child")); code != 0 {
			t.Errorf("prune with the %s scores: exit %d: %s", kind, code, errs)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", evalModel(t), "--expert-scores-out", filepath.Join(dir, "d-experts.safetensors")}, "no mixture-of-experts layers"},
		{[]string{"--model", parent, "--expert-kind", "frequency"}, "--expert-kind needs --expert-scores-out"},
		{[]string{"--model", parent, "--expert-scores-out", filepath.Join(dir, "x.safetensors"), "--expert-kind", "max"}, `--expert-kind "max"`},
	} {
		args := append([]string{"importance", "--data", data, "--ids", "--out", filepath.Join(dir, "k.safetensors")}, c.args...)
		if code, _, errs := evalRun(args...); code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %q", c.args, code, errs, c.want)
		}
	}
}
