package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata"
)

func runInspect(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestInspectText(t *testing.T) {
	code, out, errs := runInspect(t, "inspect", "--model", "meta-llama/Llama-2-7b-hf")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"LlamaForCausalLM (llama), 32 layers, hidden 4096, vocab 32000",
		"total 6,738,415,616 (6.74B)", // HF safetensors metadata of Llama-2-7b-hf
		"524,288 bytes per token at bf16 (512.0 KiB)",
		"0-31    attention+mlp  32/32/128", // one grouped row
		"202,383,360",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectJSON(t *testing.T) {
	code, out, errs := runInspect(t, "inspect", "--model", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r inspectReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// 52 layers "MEMEM*EMEMEM*...": 23 Mamba, 23 MoE, 6 attention; KV: 6 layers
	// × 2 × 2 KV heads × 128 × 2 bytes = 6144.
	if r.NumLayers != 52 || r.LayerKinds["mamba"] != 23 || r.LayerKinds["moe"] != 23 || r.LayerKinds["attention"] != 6 {
		t.Errorf("layers %d kinds %v", r.NumLayers, r.LayerKinds)
	}
	if r.KVBytesPerToken != 6144 || len(r.Layers) != 52 || r.Layers[5].Attention == nil || r.Layers[5].KVBytes != 1024 {
		t.Errorf("kv %d, layer 5 %+v", r.KVBytesPerToken, r.Layers[5])
	}
	// Card: 31.6B total, 3.6B active with embeddings.
	if r.Params.Total != 31_577_940_288 || r.Params.Active != 3_580_076_352 {
		t.Errorf("params %+v", r.Params)
	}
	// 23 Mamba layers: conv 3·(4096 + 2·8·128) = 18,432; ssm 4096·128 = 524,288.
	if r.SSMConvElems != 23*18432 || r.SSMStateElems != 23*524288 {
		t.Errorf("SSM state %d + %d", r.SSMConvElems, r.SSMStateElems)
	}
	var sum int64
	for _, l := range r.Layers {
		sum += l.Params
	}
	if sum+r.Params.Embedding+r.Params.LMHead+int64(r.Hidden) != r.Params.Total {
		t.Errorf("per-layer params do not add up to the total")
	}
}

func TestInspectConfigAndDir(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"architectures":["Qwen3ForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_attention_heads":4,
	"num_key_value_heads":2,"head_dim":16,"num_hidden_layers":2,"vocab_size":100,"tie_word_embeddings":true}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "config.json")} {
		code, out, errs := runInspect(t, "inspect", "--model", p)
		// embedding 100·64, per layer two norms 2·64 + q,o 2·64·64 + k,v
		// 2·32·64 + qk-norms 2·16 + MLP 3·64·128 = 37,024, final norm 64.
		if code != 0 || !strings.Contains(out, "total 80,512 (80.5K)") || !strings.Contains(out, "37,024") {
			t.Errorf("inspect %s: exit %d\n%s%s", p, code, out, errs)
		}
	}
	if p, ok := shareddata.Path("models/stories260K"); ok {
		code, out, _ := runInspect(t, "inspect", "--model", p)
		if code != 0 || !strings.Contains(out, "total 260,032") {
			t.Errorf("stories260K: exit %d\n%s", code, out)
		}
	}
}

func TestInspectErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"inspect"}, 2, "--model is required"},
		{[]string{"inspect", "--model", "x", "extra"}, 2, "takes no arguments"},
		{[]string{"inspect", "--model", "no/such-model"}, 2, `unknown model "no/such-model"`},
	}
	for _, tt := range tests {
		code, _, errs := runInspect(t, tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errs, tt.code, tt.want)
		}
	}
	bad := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(bad, []byte(`{"architectures":["BertModel"]}`), 0o644)
	code, _, errs := runInspect(t, "inspect", "--model", bad)
	if code != 1 || !strings.Contains(errs, "unsupported architecture BertModel; supported: ") {
		t.Errorf("unsupported arch: exit %d, %q", code, errs)
	}
}

func TestInspectList(t *testing.T) {
	code, out, _ := runInspect(t, "inspect", "--model", "list")
	if code != 0 || !strings.Contains(out, "openai/gpt-oss-120b\n") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
}

// TestInspectDTypeSaysStoredAndRun (issue 17, class 11): inspect --model
// parent said bfloat16 where the native engine runs float32; it now says
// what the config declares, what the tensors are stored in and what the
// native engine computes in, and for a preset (no weights) only the first.
func TestInspectDTypeSaysStoredAndRun(t *testing.T) {
	code, out, errs := evalRun("inspect", "--model", "parent")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "dtype        bfloat16 (config); stored BF16; the native engine runs it in float32\n") {
		t.Errorf("inspect --model parent:\n%s", out)
	}
	code, out, errs = evalRun("inspect", "--model", "parent", "--json")
	var r inspectReport
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if r.DType != "bfloat16" || !reflect.DeepEqual(r.StoredDTypes, []string{"BF16"}) || r.NativeDType != "float32" {
		t.Errorf("--json: dtype %q, stored %v, native %q", r.DType, r.StoredDTypes, r.NativeDType)
	}
	code, out, _ = evalRun("inspect", "--model", "Qwen/Qwen3-8B")
	if code != 0 || !strings.Contains(out, "dtype        bfloat16 (config)\n") || strings.Contains(out, "float32") {
		t.Errorf("a preset has no weights to describe:\n%s", out)
	}
}
