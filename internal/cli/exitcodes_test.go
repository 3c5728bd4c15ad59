package cli

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/prune"
)

// TestExitCodesEveryCommand walks every registered command with an unknown
// flag, a --model that names nothing and an input file that does not exist,
// and checks the exit status the package documents (usage 2; a missing
// input file 1, or 2 where it is a --model value) and that the message
// names what was wrong. A new command must add its row.
func TestExitCodesEveryCommand(t *testing.T) {
	tmp := t.TempDir()
	text := filepath.Join(tmp, "text.txt")
	os.WriteFile(text, []byte(evalText), 0o644)
	missing := filepath.Join(tmp, "missing", "nothing.here")
	out := filepath.Join(tmp, "out")
	const badModel = "acme/No-Such-Model"
	// model: the arguments that reach model resolution, with M for the value
	// (nil: the command takes no --model). file: an invocation naming
	// missing as an input file (nil: the command reads no file; say why).
	rows := map[string]struct {
		model, file []string
		noFile      string
	}{
		"bench-serve": {model: []string{"--model", "M"}, file: []string{"--model", missing}},
		"calibrate":   {file: []string{"--user", missing, "--user-only"}},
		"estimate": {model: []string{"--model", "M", "--gpu", "h100", "--engine", "vllm"},
			file: []string{"--scenarios", missing, "--out", out + ".csv"}},
		"eval":             {model: []string{"--model", "M", "--data", text}, file: []string{"--model", "parent", "--data", missing}},
		"generate":         {model: []string{"--model", "M", "--prompt", "The"}, file: []string{"--model", missing, "--prompt", "The"}},
		"importance":       {model: []string{"--model", "M", "--data", text, "--out", out}, file: []string{"--model", "parent", "--data", missing, "--out", out}},
		"inspect":          {model: []string{"--model", "M"}, file: []string{"--model", missing}},
		"init":             {file: []string{"--config", missing, "--out", out}},
		"prune":            {model: []string{"--model", "M", "--plan", text, "--out", out}, file: []string{"--model", "parent", "--plan", missing, "--out", out}},
		"calibrate-native": {file: []string{"--from-rows", missing, "--out", out + ".json"}},
		"validate-native":  {file: []string{"--rows", missing}},
		"job":              {file: []string{"status", missing}},
		"distill":          {file: []string{"--teacher", "parent", "--student", "parent", "--data", missing, "--tokens", "64", "--out", out}},
		"run":              {model: []string{"--model", "M", "--dir", out}, file: []string{"--config", missing, "--dir", out}},
		"demo":             {model: []string{"--model", "M", "--dir", out}, file: []string{"--config", missing, "--dir", out}},
		"search": {model: []string{"--model", "M", "--gpu", "cpu-local", "--engine", "native", "--isl", "64", "--osl", "16", "--max-params", "1M", "--out", out},
			file: []string{"--model", "parent", "--gpu", "cpu-local", "--engine", "native", "--isl", "64", "--osl", "16", "--max-params", "1M", "--importance", missing, "--out", out}},
		"tokenize":           {file: []string{"--tokenizer", missing}},
		"train":              {file: []string{"--config", missing, "--data", text, "--out", out, "--steps", "1"}},
		"validate":           {model: []string{"--model", "M", "--engine", "all"}, file: []string{"--model", missing, "--engine", "all"}},
		"validate-estimator": {file: []string{"--user", missing, "--user-only"}},
		"version":            {noFile: "prints the build; reads nothing"},
	}
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasPrefix(name, "test-") { // registered by this package's tests
			continue
		}
		row, ok := rows[name]
		if !ok {
			t.Errorf("command %s has no row in TestExitCodesEveryCommand: add one", name)
			continue
		}
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		commands[name].Flags(fs)
		if hasModel := fs.Lookup("model") != nil; hasModel != (row.model != nil) {
			t.Errorf("%s: takes --model: %v, but its row says %v", name, hasModel, row.model != nil)
		}
		t.Run(name+"/unknown flag", func(t *testing.T) {
			code, _, errs := evalRun(name, "--no-such-flag")
			if code != 2 || !strings.Contains(errs, "no-such-flag") {
				t.Errorf("exit %d (want 2), stderr %q", code, errs)
			}
		})
		if row.model != nil {
			t.Run(name+"/bad model", func(t *testing.T) {
				args := []string{name}
				for _, a := range row.model {
					if a == "M" {
						a = badModel
					}
					args = append(args, a)
				}
				code, _, errs := evalRun(args...)
				if code != 2 || !strings.Contains(errs, badModel) || !strings.Contains(errs, "--model") {
					t.Errorf("%v: exit %d (want 2 and a message naming --model %s), stderr %q", args, code, badModel, errs)
				}
			})
		}
		if row.file != nil {
			t.Run(name+"/missing file", func(t *testing.T) {
				args := append([]string{name}, row.file...)
				code, _, errs := evalRun(args...)
				if code != 1 && code != 2 || !strings.Contains(errs, missing) {
					t.Errorf("%v: exit %d (want 1 or 2 and a message naming %s), stderr %q", args, code, missing, errs)
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("%v wrote %s", args, out)
				}
			})
		} else if row.noFile == "" {
			t.Errorf("%s: row has neither a missing-file case nor a reason why not", name)
		}
	}
}

// TestExistsErrorOneExitCode: every command that refuses to replace an
// existing output without --force exits with the one status ExistsExit
// (it was 1 in prune and estimate, 2 in search and distill), names the path
// it refused (not another flag's: distill's --log file used to be called
// --out) with the one hint, and leaves the path as it was.
func TestExistsErrorOneExitCode(t *testing.T) {
	tmp := t.TempDir()
	text := filepath.Join(tmp, "text.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat(distillText+"\n\n", 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	scenarios := filepath.Join(tmp, "in.csv")
	if err := os.WriteFile(scenarios, []byte("id,model,gpu,engine,isl,osl,concurrency\na,meta-llama/Meta-Llama-3.1-8B,h100-sxm,vllm,1024,256,16\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(tmp, "plan.json")
	if err := savePlan(plan, &prune.Plan{Version: 1}, false); err != nil {
		t.Fatal(err)
	}
	cfg := evalWrite(t, "config.json", []byte(trainConfig))
	fresh := func() string { return filepath.Join(t.TempDir(), "new") }
	tests := []struct {
		name string
		args func(mine string) []string
	}{
		{"prune --out", func(mine string) []string {
			return []string{"prune", "--model", "parent", "--plan", plan, "--out", mine}
		}},
		{"search --out", func(mine string) []string {
			return []string{"search", "--model", "parent", "--gpu", "cpu-local", "--engine", "native", "--isl", "64", "--osl", "16", "--max-params", "3M", "--out", mine}
		}},
		{"distill --out", func(mine string) []string {
			return []string{"distill", "--teacher", "parent", "--student", "parent", "--data", text, "--tokens", "64", "--out", mine}
		}},
		{"distill --log", func(mine string) []string {
			return []string{"distill", "--teacher", "parent", "--student", "parent", "--data", text, "--tokens", "64", "--out", fresh(), "--log", mine}
		}},
		{"distill --checkpoint", func(mine string) []string {
			return []string{"distill", "--teacher", "parent", "--student", "parent", "--data", text, "--tokens", "64", "--out", fresh(), "--checkpoint", mine}
		}},
		{"estimate --out", func(mine string) []string {
			return []string{"estimate", "--scenarios", scenarios, "--out", mine}
		}},
		{"calibrate-native --out", func(mine string) []string {
			return []string{"calibrate-native", "--from-rows", filepath.Join(tmp, "rows.csv"), "--out", mine}
		}},
		{"calibrate --out", func(mine string) []string {
			return []string{"calibrate", "--user", filepath.Join(tmp, "rows.csv"), "--user-only", "--out", mine}
		}},
		{"importance --out", func(mine string) []string {
			return []string{"importance", "--model", "parent", "--data", text, "--seqs", "1", "--seq-len", "16", "--out", mine}
		}},
		{"eval --build", func(mine string) []string {
			return []string{"eval", "--build", mine, "--data", "parent:test"}
		}},
		{"train --out", func(mine string) []string {
			return []string{"train", "--config", cfg, "--out", mine, "--bpe-merges", "20", "--steps", "2", "--batch", "1", "--seq-len", "8", "--data", text}
		}},
		{"train --log", func(mine string) []string {
			return []string{"train", "--config", cfg, "--out", fresh(), "--log", mine, "--bpe-merges", "20", "--steps", "2", "--batch", "1", "--seq-len", "8", "--data", text}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mine := filepath.Join(t.TempDir(), "mine")
			if err := os.WriteFile(mine, []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			code, _, errs := evalRun(tc.args(mine)...)
			if code != ExistsExit || !strings.Contains(errs, mine+" already exists") || !strings.Contains(errs, ForceHint) {
				t.Errorf("over an existing file: exit %d (want %d, naming %s, with %q): %s", code, ExistsExit, mine, ForceHint, errs)
			}
			if flag := strings.Fields(tc.name)[1]; flag != "--out" && strings.Contains(errs, "--out") {
				t.Errorf("the refused file is %s's, but the message names --out: %s", flag, errs)
			}
			if tc.name == "distill --checkpoint" && !strings.Contains(errs, "--resume") {
				t.Errorf("an earlier run's checkpoint: the message does not say it can be resumed: %s", errs)
			}
			if b, _ := os.ReadFile(mine); string(b) != "mine" {
				t.Errorf("replaced without --force: %q", b)
			}
		})
	}
}
