package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/engine"
)

const init16Config = `{"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":256,"hidden_size":32,"intermediate_size":64,
"num_hidden_layers":16,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":128,"rms_norm_eps":1e-5,
"rope_theta":10000,"tie_word_embeddings":false,"torch_dtype":"bfloat16"}`

// TestInitCommand: init writes a checkpoint the engine loads (in place, in
// bf16) and runs, and refuses an existing directory, an architecture the
// engine cannot run and a bad dtype with nothing written.
func TestInitCommand(t *testing.T) {
	base := t.TempDir()
	cfg := filepath.Join(base, "config16.json")
	if err := os.WriteFile(cfg, []byte(init16Config), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(base, "m")
	code, stdout, errs := runInspect(t, "init", "--config", cfg, "--out", out, "--seed", "5", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Out    string
		Params int64
		DType  string
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Out != out || res.DType != "bf16" || res.Params == 0 {
		t.Fatalf("summary %q (%v)", stdout, err)
	}
	m, err := engine.LoadWith(out, engine.LoadOptions{Mapped: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.NumParams() != int(res.Params) || m.Arch().NumLayers() != 16 || m.MappedBytes() == 0 {
		t.Fatalf("loaded %d parameters, %d layers, %d bytes mapped; summary says %d parameters", m.NumParams(), m.Arch().NumLayers(), m.MappedBytes(), res.Params)
	}
	if _, err := m.Forward([]int32{1, 2, 3}, 1, 3); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(out, "model.safetensors"))
	if code, _, errs := runInspect(t, "init", "--config", cfg, "--out", out, "--seed", "6"); code != 1 || !strings.Contains(errs, "--force") {
		t.Fatalf("init over an existing directory: exit %d: %s", code, errs)
	}
	if after, _ := os.ReadFile(filepath.Join(out, "model.safetensors")); string(after) != string(before) {
		t.Fatal("a refused init changed the checkpoint")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		// Sigmoid-routed experts with a shared expert: not run natively.
		{[]string{"--config", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"}, "which cannot run"},
		{[]string{"--config", cfg, "--dtype", "int8"}, "--dtype"},
		{[]string{"--config", filepath.Join(base, "absent.json")}, "absent.json"},
	} {
		dir := filepath.Join(base, "refused")
		code, _, errs := runInspect(t, append([]string{"init", "--out", dir}, c.args...)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("init %v: exit %d, stderr %q (want it to name %q)", c.args, code, errs, c.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("init %v left %s", c.args, dir)
		}
	}
}
