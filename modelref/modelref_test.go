package modelref_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/architecture/published"
	"github.com/autocompress/autocompress/modelref"
)

const tinyConfig = `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64,
 "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 4, "rms_norm_eps": 1e-5, "max_position_embeddings": 64,
 "tie_word_embeddings": true, "hidden_act": "silu", "torch_dtype": "float32"}`

func TestResolve(t *testing.T) {
	root := filepath.Join("..")
	tmp := t.TempDir()
	ckpt := filepath.Join(tmp, "ckpt")
	os.Mkdir(ckpt, 0o755)
	os.WriteFile(filepath.Join(ckpt, "config.json"), []byte(tinyConfig), 0o644)
	cfg := filepath.Join(tmp, "tiny.json")
	os.WriteFile(cfg, []byte(tinyConfig), 0o644)
	empty := filepath.Join(tmp, "empty")
	os.Mkdir(empty, 0o755)
	// A ground-truth model that is not an architecture preset.
	shape := ""
	for _, k := range published.Known() {
		if _, err := architecture.Preset(k); err != nil {
			shape = k
			break
		}
	}
	if shape == "" {
		t.Fatal("every ground-truth model is also a preset: the KindShape case cannot be tested")
	}

	for _, tc := range []struct {
		name, model string
		kind        modelref.Kind
		layers      int    // of Arch; 0: Arch fails
		checkpoint  string // error text of Checkpoint, "" when it gives a directory
		resolveErr  string
	}{
		// The bare word is the embedded parent even where ./parent is the Go package.
		{name: "parent from the repository root", model: "parent", kind: modelref.KindParent, layers: 8},
		{name: "the parent package folder as a path", model: "./parent", kind: modelref.KindCheckpoint, checkpoint: "no config.json"},
		{name: "checkpoint directory", model: ckpt, kind: modelref.KindCheckpoint, layers: 2},
		{name: "directory without config.json", model: empty, kind: modelref.KindCheckpoint, checkpoint: "no config.json"},
		{name: "config file", model: cfg, kind: modelref.KindConfig, layers: 2, checkpoint: "holds no weights"},
		{name: "architecture preset", model: "meta-llama/Llama-2-7b-hf", kind: modelref.KindPreset, layers: 32, checkpoint: "holds no weights"},
		{name: "ground-truth model", model: shape, kind: modelref.KindShape, layers: -1, checkpoint: "holds no weights"},
		{name: "unknown name", model: "acme/Nope-7B", resolveErr: `unknown model "acme/Nope-7B"`},
		{name: "missing path", model: "./no/such/dir", resolveErr: "no such file or directory"},
		{name: "missing config", model: "nope.json", resolveErr: "no such file or directory"},
		{name: "empty", model: "", resolveErr: "no model given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.model == "parent" || tc.model == "./parent" {
				t.Chdir(root)
			}
			r, err := modelref.Resolve(tc.model)
			if tc.resolveErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.resolveErr) {
					t.Fatalf("Resolve(%q) = %v, %v; want an error containing %q", tc.model, r, err, tc.resolveErr)
				}
				var ue *modelref.UnknownError
				if tc.model != "" && !errors.As(err, &ue) {
					t.Errorf("error %T, want *UnknownError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tc.model, err)
			}
			if r.Kind != tc.kind {
				t.Errorf("kind %v, want %v", r.Kind, tc.kind)
			}
			m, err := r.Arch()
			switch {
			case tc.layers == 0:
				if err == nil {
					t.Errorf("Arch succeeded")
				}
			case err != nil:
				t.Errorf("Arch: %v", err)
			case tc.layers > 0 && m.NumLayers() != tc.layers:
				t.Errorf("Arch: %d layers, want %d", m.NumLayers(), tc.layers)
			}
			d, err := r.Checkpoint()
			if tc.checkpoint != "" {
				if err == nil || !strings.Contains(err.Error(), tc.checkpoint) {
					t.Errorf("Checkpoint = %q, %v; want an error containing %q", d, err, tc.checkpoint)
				}
				return
			}
			if err != nil {
				t.Fatalf("Checkpoint: %v", err)
			}
			if _, err := os.Stat(filepath.Join(d, "config.json")); err != nil {
				t.Errorf("Checkpoint %s has no config.json", d)
			}
		})
	}
}

// Names is what Resolve accepts: parent, every architecture preset and every
// ground-truth model, each of which resolves.
func TestNames(t *testing.T) {
	names := modelref.Names()
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("Names is not sorted and unique: %v", names)
	}
	for _, want := range append(append([]string{"parent"}, architecture.Presets()...), published.Known()...) {
		if !slices.Contains(names, want) {
			t.Errorf("Names lacks %q", want)
		}
	}
	for _, n := range names {
		if n == modelref.Parent {
			continue
		}
		r, err := modelref.Resolve(n)
		if err != nil {
			t.Errorf("Resolve(%q): %v", n, err)
			continue
		}
		if _, err := r.Arch(); err != nil {
			t.Errorf("%s: Arch: %v", n, err)
		}
	}
}
