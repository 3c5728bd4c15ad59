package architecture

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/internal/shareddata/sdtest"
)

// publishedExtra are exact counts (HF safetensors metadata) of the presets
// that have no shared config.
var publishedExtra = map[string]publishedCount{
	"meta-llama--Llama-2-7b-hf.json":          {total: 6_738_415_616},
	"meta-llama--Llama-2-13b-hf.json":         {total: 13_015_864_320},
	"meta-llama--Llama-2-70b-hf.json":         {total: 68_976_648_192},
	"meta-llama--Meta-Llama-3-8B.json":        {total: 8_030_261_248},
	"meta-llama--Llama-3.3-70B-Instruct.json": {total: 70_553_706_496},
	"mistralai--Mistral-7B-v0.1.json":         {total: 7_241_732_096},
	"Qwen--Qwen2-7B.json":                     {total: 7_615_616_512},
	// meta-llama/Llama-3.2-1B (config.json of the HF repository, the fields
	// the engines read; safetensors metadata 1,235,814,400 with the tied
	// LM head counted once).
	"meta-llama--Llama-3.2-1B.json": {total: 1_235_814_400},
}

func TestPresets(t *testing.T) {
	names := Presets()
	want := []string{"meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-70b-hf", "meta-llama/Meta-Llama-3-8B",
		"mistralai/Mistral-7B-v0.1", "Qwen/Qwen2-7B", "meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Meta-Llama-3.1-8B",
		"nvidia/Llama-3_3-Nemotron-Super-49B-v1", "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8", "openai/gpt-oss-20b", "Qwen/Qwen3-235B-A22B",
		"meta-llama/Llama-3.2-1B", "Qwen/Qwen3-1.7B"}
	for _, w := range want {
		found := false
		for _, n := range names {
			found = found || n == w
		}
		if !found {
			t.Errorf("preset %s missing from %v", w, names)
		}
	}
	for _, name := range names {
		m, err := Preset(strings.ToUpper(name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if m.Name != name {
			t.Errorf("Name = %q, want %q", m.Name, name)
		}
		base := presetFile(name)
		pc, ok := published[base]
		if !ok {
			pc, ok = publishedExtra[base]
		}
		if !ok {
			t.Errorf("%s: no published parameter count recorded", name)
			continue
		}
		checkPublished(t, base, m, pc)
		// Presets are written by Config: writing them again changes nothing.
		data, err := m.Config(ConfigOptions{})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		stored, _ := presetFS.ReadFile("presets/" + base)
		if string(data) != string(stored) {
			t.Errorf("%s: Config output differs from the stored preset", name)
		}
	}
	for alias, want := range map[string]string{"meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B", "qwen3-8b": "Qwen/Qwen3-8B", "gpt-oss-120B": "openai/gpt-oss-120b"} {
		if m, err := Preset(alias); err != nil || m.Name != want {
			t.Errorf("Preset(%q) = %v, %v; want %s", alias, m, err, want)
		}
	}
	if _, err := Preset("other/Qwen3-8B"); err == nil {
		t.Error("a name with another organisation matched a preset")
	}
	if _, err := Preset("no/such-model"); err == nil || !strings.Contains(err.Error(), "meta-llama/Llama-2-7b-hf") {
		t.Errorf("unknown preset error %v should list the presets", err)
	}
}

// TestPresetsMatchShared checks each preset that has a shared config against
// the model read from that config.
func TestPresetsMatchShared(t *testing.T) {
	dir := sdtest.Require(t, "configs")
	n := 0
	for _, name := range Presets() {
		file := filepath.Join(dir, presetFile(name))
		if _, err := os.Stat(file); err != nil {
			continue
		}
		n++
		real, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if !sameModel(real, p) {
			t.Errorf("%s: preset differs from %s: %s", name, file, diffModel(real, p))
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if n != len(files) {
		t.Errorf("%d presets match shared configs, but there are %d configs", n, len(files))
	}
}

// TestRealSizeParentPresets pins the shapes of the two small real-size
// parents the CPU pipeline benchmarks use (RESULTS-1B.md), and compares each
// with its real config.json when the shared configs hold it.
func TestRealSizeParentPresets(t *testing.T) {
	for _, c := range []struct {
		name                          string
		layers, hidden, inter, kv, hd int
		vocab                         int
		tied                          bool
	}{
		{"meta-llama/Llama-3.2-1B", 16, 2048, 8192, 8, 64, 128256, true},
		{"Qwen/Qwen3-1.7B", 28, 2048, 6144, 8, 128, 151936, true},
	} {
		m, err := Preset(c.name)
		if err != nil {
			t.Fatal(err)
		}
		l := m.Layers[0]
		if len(m.Layers) != c.layers || m.Hidden != c.hidden || l.MLP.Width != c.inter ||
			l.Attention.KVHeads != c.kv || l.Attention.HeadDim != c.hd || m.Vocab != c.vocab || m.TiedEmbeddings != c.tied {
			t.Errorf("%s: %d layers, hidden %d, intermediate %d, kv heads %d, head dim %d, vocab %d, tied %v; want %+v",
				c.name, len(m.Layers), m.Hidden, l.MLP.Width, l.Attention.KVHeads, l.Attention.HeadDim, m.Vocab, m.TiedEmbeddings, c)
		}
		dir, ok := shareddata.Path("configs")
		if !ok {
			t.Logf("%s: no shared configs; shape checked only", c.name)
			continue
		}
		file := filepath.Join(dir, presetFile(c.name))
		if _, err := os.Stat(file); err != nil {
			t.Logf("%s: no shared config %s; shape checked only", c.name, file)
			continue
		}
		real, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if !sameModel(real, m) {
			t.Errorf("%s: preset differs from %s: %s", c.name, file, diffModel(real, m))
		}
	}
}

func ExamplePreset() {
	m, err := Preset("qwen/qwen3-30b-a3b")
	if err != nil {
		fmt.Println(err)
		return
	}
	p := m.Params()
	fmt.Printf("%s: %d layers, %.1fB total, %.1fB active\n", m.Name, len(m.Layers), float64(p.Total)/1e9, float64(p.Active)/1e9)
	// Output:
	// Qwen/Qwen3-30B-A3B: 48 layers, 30.5B total, 3.4B active
}
