package cli

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
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
		"prune":            {model: []string{"--model", "M", "--plan", text, "--out", out}, file: []string{"--model", "parent", "--plan", missing, "--out", out}},
		"calibrate-native": {file: []string{"--from-rows", missing, "--out", out + ".json"}},
		"validate-native":  {file: []string{"--rows", missing}},
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
