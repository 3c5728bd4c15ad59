package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// familyConfigDir writes a checkpoint directory holding only config.json:
// any command that got past its entry check would fail on the missing
// weights, not with the engine's refusal.
func familyConfigDir(t *testing.T, cfg map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func tinyFamilyConfig(arch, modelType string) map[string]any {
	return map[string]any{
		"architectures": []string{arch}, "model_type": modelType,
		"vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "max_position_embeddings": 128,
		"rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": false,
	}
}

// TestCommandsRefuseUnsupportedFamilyAtEntry: every command that runs the
// model in the native engine refuses a family the engine cannot run
// (Nemotron-3's sigmoid-routed MoE), and every command that trains it one
// the engine runs forward only (gpt-oss), before any other work: exit 2
// naming the flag and the family, no output written, and no data read (the
// data files given do not exist).
func TestCommandsRefuseUnsupportedFamilyAtEntry(t *testing.T) {
	mixtral := tinyFamilyConfig("MixtralForCausalLM", "mixtral")
	mixtral["num_local_experts"] = 4
	mixtral["num_experts_per_tok"] = 2
	gptoss := tinyFamilyConfig("GptOssForCausalLM", "gpt_oss")
	gptoss["num_local_experts"] = 4
	gptoss["num_experts_per_tok"] = 2
	nemotron := tinyFamilyConfig("NemotronHForCausalLM", "nemotron_h")
	hybrid := map[string]any{}
	for k, v := range map[string]any{"hybrid_override_pattern": "M*E", "mamba_num_heads": 4, "mamba_head_dim": 8,
		"n_groups": 2, "ssm_state_size": 8, "conv_kernel": 4, "layer_norm_epsilon": 1e-5,
		"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8, "num_hidden_layers": 3} {
		nemotron[k] = v
	}
	for k, v := range nemotron {
		hybrid[k] = v
	}
	hybrid["hybrid_override_pattern"] = "M*-"
	families := []struct {
		name, arch, reason string
		cfg                map[string]any
		// trainOnly: the engine runs the family forward, so only the
		// commands that train it refuse it (CheckTrain).
		trainOnly bool
	}{
		{"gpt-oss", "gpt-oss", "reference trainer", gptoss, true},
		// The engine runs Nemotron-H's Mamba2, attention and MLP layers, not
		// its sigmoid-routed experts.
		{"nemotron-moe", "NemotronHForCausalLM", "mixture of experts", nemotron, false},
	}
	missing := filepath.Join(t.TempDir(), "no-such-data.txt")
	commands := []struct {
		name string
		args func(model, out string) []string
		flag string // the flag the message names
		// trainFlag names the model the command trains (refused by
		// CheckTrain alone); "" for a command that trains none.
		trainFlag string
	}{
		{"importance", func(m, o string) []string {
			return []string{"importance", "--model", m, "--data", missing, "--out", filepath.Join(o, "scores.safetensors")}
		}, "--model", ""},
		{"distill", func(m, o string) []string {
			return []string{"distill", "--teacher", m, "--student", m, "--data", missing, "--tokens", "4096", "--out", o}
		}, "--teacher", "--student"},
		{"eval", func(m, o string) []string { return []string{"eval", "--model", m, "--data", missing} }, "--model", ""},
		{"generate", func(m, o string) []string { return []string{"generate", "--model", m, "--ids", "1,2"} }, "--model", ""},
		{"bench-serve", func(m, o string) []string { return []string{"bench-serve", "--model", m} }, "--model", ""},
		{"train", func(m, o string) []string {
			return []string{"train", "--config", filepath.Join(m, "config.json"), "--data", missing, "--out", o}
		}, "--config", "--config"},
		{"run", func(m, o string) []string { return []string{"run", "--model", m, "--dir", o} }, "model", ""},
		// search runs the parent only for the measured proxy (--data).
		{"search --data", func(m, o string) []string {
			return []string{"search", "--model", m, "--gpu", "rtx-5090", "--engine", "vllm", "--workload", "chat", "--max-params", "1000", "--data", missing, "--out", o}
		}, "--model", ""},
	}
	for _, fam := range families {
		model := familyConfigDir(t, fam.cfg)
		for _, c := range commands {
			flag := c.flag
			if fam.trainOnly {
				if c.trainFlag == "" {
					continue
				}
				flag = c.trainFlag
			}
			t.Run(fam.name+"/"+c.name, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "out")
				var stdout, stderr bytes.Buffer
				code := Run(context.Background(), c.args(model, out), strings.NewReader(""), &stdout, &stderr)
				msg := stderr.String()
				if code != 2 {
					t.Fatalf("exit %d, want 2 (usage: a model the command cannot run); stderr:\n%s", code, msg)
				}
				for _, want := range []string{flag, fam.arch, fam.reason, "native engine"} {
					if !strings.Contains(msg, want) {
						t.Errorf("stderr lacks %q:\n%s", want, msg)
					}
				}
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("%s was created (stat: %v): the command did work before refusing", out, err)
				}
			})
		}
	}

	// A family the engine runs passes the entry check and fails later, on
	// the missing weights or data; search without --data prices a family
	// the engine cannot run.
	llama := familyConfigDir(t, tinyFamilyConfig("LlamaForCausalLM", "llama"))
	moe := familyConfigDir(t, mixtral)
	mamba := familyConfigDir(t, hybrid)
	for _, args := range [][]string{
		{"eval", "--model", mamba, "--data", missing},
		{"bench-serve", "--model", mamba},
		{"generate", "--model", llama, "--ids", "1,2"},
		{"eval", "--model", moe, "--data", missing},
		{"importance", "--model", moe, "--data", missing, "--out", filepath.Join(t.TempDir(), "s.safetensors")},
		{"importance", "--model", llama, "--data", missing, "--out", filepath.Join(t.TempDir(), "s.safetensors")},
		{"search", "--model", familyConfigDir(t, gptoss), "--gpu", "rtx-5090", "--engine", "vllm", "--workload", "chat",
			"--max-params", "1000", "--out", filepath.Join(t.TempDir(), "o")},
		// The engine trains MoE layers (engine.CheckTrain): train and
		// distill's student take them.
		{"train", "--config", filepath.Join(moe, "config.json"), "--data", missing, "--out", filepath.Join(t.TempDir(), "o")},
		{"distill", "--teacher", moe, "--student", moe, "--data", missing, "--tokens", "4096", "--out", filepath.Join(t.TempDir(), "o")},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		if strings.Contains(stderr.String(), "native engine") || code == 0 && args[0] != "search" {
			t.Errorf("%s %s: exit %d, stderr %q; want no engine refusal (and a later failure but for search)", args[0], args[2], code, stderr.String())
		}
	}

	// The engine runs Mamba2 mixers forward only: train, distill's student
	// and run refuse them at entry, naming the flag and the reference
	// trainer; distill's teacher may be one.
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"train", "--config", filepath.Join(mamba, "config.json"), "--data", missing, "--out", filepath.Join(t.TempDir(), "o")}, "--config"},
		{[]string{"distill", "--teacher", mamba, "--student", mamba, "--data", missing, "--tokens", "4096", "--out", filepath.Join(t.TempDir(), "o")}, "--student"},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), c.args, strings.NewReader(""), &stdout, &stderr)
		msg := stderr.String()
		if code != 2 || !strings.Contains(msg, c.flag) || !strings.Contains(msg, "PyTorch reference trainer") {
			t.Errorf("%s on a hybrid model: exit %d, stderr %q; want 2 naming %s and the PyTorch reference trainer", c.args[0], code, msg, c.flag)
		}
	}
}
