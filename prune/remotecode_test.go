package prune

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune/remotecode"
)

// deciLMKinds are the per-layer child kinds of the embedded parent whose
// configuration module is checked (plans in testdata/remotecode/plans;
// scripts/device/decilm_children.sh prunes the same ones for the device
// check). Linear blocks (replace_with_linear) are not among them: prune
// never writes them.
var deciLMKinds = []string{"uniform-kv", "varying-kv", "first-attention", "last-attention", "mlp-only"}

// deciLMChild prunes the embedded parent with the plan of one kind.
func deciLMChild(t *testing.T, kind string, extra ...string) string {
	t.Helper()
	pdir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := LoadPlan(filepath.Join("testdata", "remotecode", "plans", kind+".json"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), kind)
	if _, err := Prune(context.Background(), Options{Model: pdir, Plan: plan, Out: out, ExtraFiles: extra}); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	return out
}

// TestDeciLMRemoteCodeFiles: every DeciLM child carries the embedded
// configuration module, its auto_map names only modules the child
// contains, and every module those import relatively (recursively, as
// transformers copies them) is there too. A modeling module comes only
// with the user's files, and only then is it named.
func TestDeciLMRemoteCodeFiles(t *testing.T) {
	for _, kind := range deciLMKinds {
		t.Run(kind, func(t *testing.T) {
			dir := deciLMChild(t, kind)
			for _, f := range remotecode.DeciLMFiles() {
				got, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatalf("%s not written: %v", f, err)
				}
				want, _ := remotecode.DeciLMFile(f)
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from the embedded module", f)
				}
			}
			am := autoMapOf(t, dir)
			if want := map[string]string{"AutoConfig": remotecode.DeciLMAutoConfig}; !reflect.DeepEqual(am, want) {
				t.Errorf("auto_map %v, want %v", am, want)
			}
			checkAutoMapFiles(t, dir, am)
		})
	}
	modeling := filepath.Join(t.TempDir(), remotecode.DeciLMModeling)
	must(t, os.WriteFile(modeling, []byte("from .configuration_decilm import DeciLMConfig\n"), 0o644))
	dir := deciLMChild(t, "uniform-kv", modeling)
	am := autoMapOf(t, dir)
	if am["AutoModelForCausalLM"] != remotecode.DeciLMAutoModel {
		t.Errorf("with %s added, auto_map %v", remotecode.DeciLMModeling, am)
	}
	checkAutoMapFiles(t, dir, am)
	// transformers (hf) needs the modeling module: without it the child
	// fails there for the remote code only.
	r, err := export.ValidateDir(deciLMChild(t, "uniform-kv"), "hf")
	must(t, err)
	if r.OK() || r.Violations[0].Rule != "remote-code" {
		t.Errorf("hf without a modeling module: %v", r.Violations)
	}
	if r, _ := export.ValidateDir(dir, "hf"); !r.OK() {
		t.Errorf("hf with the modeling module: %v", r.Err())
	}
}

// TestDeciLMParentRemoteCode: a DeciLM parent's own copies of the module
// files prune writes are replaced by ours, and its modeling module is kept
// and named in auto_map.
func TestDeciLMParentRemoteCode(t *testing.T) {
	deciParent := deciLMChild(t, "mlp-only")
	theirs := []byte("# the parent's own file\n")
	for _, f := range []string{"configuration_decilm.py", "block_config.py", remotecode.DeciLMModeling} {
		must(t, os.WriteFile(filepath.Join(deciParent, f), theirs, 0o644))
	}
	out := filepath.Join(t.TempDir(), "grandchild")
	plan := &Plan{Version: 1, Layers: []LayerPlan{{Layer: 1, RemoveAttention: true}}}
	if _, err := Prune(context.Background(), Options{Model: deciParent, Plan: plan, Out: out}); err != nil {
		t.Fatal(err)
	}
	for _, f := range remotecode.DeciLMFiles() {
		got, err := os.ReadFile(filepath.Join(out, f))
		must(t, err)
		if want, _ := remotecode.DeciLMFile(f); !bytes.Equal(got, want) {
			t.Errorf("%s is not ours", f)
		}
	}
	if got, err := os.ReadFile(filepath.Join(out, remotecode.DeciLMModeling)); err != nil || !bytes.Equal(got, theirs) {
		t.Errorf("the parent's %s not copied: %v", remotecode.DeciLMModeling, err)
	}
	want := map[string]string{"AutoConfig": remotecode.DeciLMAutoConfig, "AutoModelForCausalLM": remotecode.DeciLMAutoModel}
	if am := autoMapOf(t, out); !reflect.DeepEqual(am, want) {
		t.Errorf("auto_map %v, want %v", am, want)
	}
}

func autoMapOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	must(t, err)
	var cfg struct {
		AutoMap map[string]string `json:"auto_map"`
	}
	must(t, json.Unmarshal(b, &cfg))
	return cfg.AutoMap
}

// checkAutoMapFiles: each auto_map module and everything it imports
// relatively is in dir.
func checkAutoMapFiles(t *testing.T, dir string, am map[string]string) {
	t.Helper()
	for k, ref := range am {
		file := ref[:strings.LastIndex(ref, ".")] + ".py"
		if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
			t.Errorf("auto_map.%s names %s, which the child lacks", k, file)
			continue
		}
		imps, err := export.RemoteCodeImports(dir, file)
		must(t, err)
		for _, im := range imps {
			if !im.Present {
				t.Errorf("%s imports %s, which the child lacks", im.By, im.File)
			}
		}
	}
}

// loaderView is what testdata/remotecode/load_child.py prints: the
// configuration as built by the child's module, and per layer the
// attributes the engines' loaders read.
type loaderView struct {
	Class            string   `json:"class"`
	Modules          []string `json:"modules"`
	ModelType        string   `json:"model_type"`
	NumHiddenLayers  int      `json:"num_hidden_layers"`
	NumKeyValueHeads *int     `json:"num_key_value_heads"`
	IntermediateSize *int     `json:"intermediate_size"`
	RoundTrip        bool     `json:"round_trip"`
	Layers           []struct {
		AttentionNoOp    bool `json:"attention_no_op"`
		AttentionLinear  bool `json:"attention_linear"`
		NHeadsInGroup    *int `json:"n_heads_in_group"`
		KVHeads          int  `json:"kv_heads"`
		FFNNoOp          bool `json:"ffn_no_op"`
		FFNLinear        bool `json:"ffn_linear"`
		HasFFNMult       bool `json:"has_ffn_mult"`
		IntermediateSize int  `json:"intermediate_size"`
		WidthVLLM        int  `json:"width_vllm"`
		WidthFFNMult     int  `json:"width_ffn_mult"`
	} `json:"layers"`
}

// TestDeciLMConfigModule runs the configuration module prune writes under
// Debian's python3, for every child kind, with a STAND-IN for transformers
// (testdata/remotecode/standin: just the LlamaConfig/PretrainedConfig base
// classes the module subclasses; the real transformers is exercised only
// by the device script scripts/device/decilm_autoconfig.py). The module is
// imported as transformers' dynamic module loader does (copied with its
// relative imports into a transformers_modules package), built from
// config.json, and every layer's no_op, KV heads (num_attention_heads //
// n_heads_in_group) and FFN width (vLLM's hasattr(ffn_mult) path, the
// int(2·ffn_mult·hidden/3)-rounded-up-to-256 path of the other engines, and
// intermediate_size) must be what the Go side wrote.
func TestDeciLMConfigModule(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s is absent: the DeciLM configuration module is not exercised (install Debian's python3)", python)
	}
	standin, err := filepath.Abs(filepath.Join("testdata", "remotecode", "standin"))
	must(t, err)
	script, err := filepath.Abs(filepath.Join("testdata", "remotecode", "load_child.py"))
	must(t, err)
	for _, kind := range deciLMKinds {
		// Two stand-ins: transformers 4's LlamaConfig, and one that refuses
		// None for the fields transformers 5 types int under @strict.
		for _, strict := range []bool{false, true} {
			name := kind
			if strict {
				name += "-strict"
			}
			t.Run(name, func(t *testing.T) { checkConfigModule(t, python, standin, script, kind, strict) })
		}
	}
}

// checkConfigModule runs load_child.py on the child of one kind and
// compares what it prints with the child's config as Go reads it.
func checkConfigModule(t *testing.T, python, standin, script, kind string, strict bool) {
	dir := deciLMChild(t, kind)
	// -S: no site-packages, so nothing but the stand-in answers to
	// "import transformers"; -B: no bytecode in testdata.
	cmd := exec.Command(python, "-B", "-S", script, dir, t.TempDir())
	mode := "STANDIN_STRICT="
	if strict {
		mode += "1"
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+standin, mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	var v loaderView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m, err := architecture.Load(filepath.Join(dir, "config.json"))
	must(t, err)
	if v.Class != "transformers_modules.child.configuration_decilm.DeciLMConfig" || v.ModelType != "nemotron-nas" {
		t.Errorf("class %s, model_type %s", v.Class, v.ModelType)
	}
	if want := remotecode.DeciLMFiles(); !reflect.DeepEqual(v.Modules, []string{"block_config", "configuration_decilm"}) || len(want) != 2 {
		t.Errorf("modules loaded %v, embedded %v", v.Modules, want)
	}
	widest := 0
	for _, l := range m.Layers {
		if l.MLP != nil {
			widest = max(widest, l.MLP.Width)
		}
	}
	// Per-layer values are in block_configs: the globals stay None, or
	// where the base class refuses that, intermediate_size is the widest FFN.
	if v.NumKeyValueHeads != nil || !strict && v.IntermediateSize != nil || strict && (v.IntermediateSize == nil || *v.IntermediateSize != widest) {
		t.Errorf("global num_key_value_heads %v, intermediate_size %v (widest FFN %d)", v.NumKeyValueHeads, v.IntermediateSize, widest)
	}
	if !v.RoundTrip {
		t.Error("to_dict does not round-trip block_configs through JSON")
	}
	if v.NumHiddenLayers != len(m.Layers) || len(v.Layers) != len(m.Layers) {
		t.Fatalf("%d layers (%d blocks), Go wrote %d", v.NumHiddenLayers, len(v.Layers), len(m.Layers))
	}
	for i, l := range m.Layers {
		p := v.Layers[i]
		if p.AttentionLinear || p.FFNLinear {
			t.Errorf("layer %d: a linear block", i)
		}
		if p.AttentionNoOp != (l.Attention == nil) {
			t.Errorf("layer %d: attention.no_op %v, Go attention %v", i, p.AttentionNoOp, l.Attention)
		} else if l.Attention != nil && p.KVHeads != l.Attention.KVHeads {
			t.Errorf("layer %d: %d KV heads (n_heads_in_group %v), Go wrote %d", i, p.KVHeads, *p.NHeadsInGroup, l.Attention.KVHeads)
		}
		if p.FFNNoOp != (l.MLP == nil) {
			t.Errorf("layer %d: ffn.no_op %v, Go MLP %v", i, p.FFNNoOp, l.MLP)
		} else if w := l.MLP; w != nil && (!p.HasFFNMult || p.WidthVLLM != w.Width || p.WidthFFNMult != w.Width || p.IntermediateSize != w.Width) {
			t.Errorf("layer %d: ffn_mult present %v, widths vLLM %d, ffn_mult %d, intermediate_size %d; Go wrote %d",
				i, p.HasFFNMult, p.WidthVLLM, p.WidthFFNMult, p.IntermediateSize, w.Width)
		}
	}
}
