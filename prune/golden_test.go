package prune

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/autocompress/autocompress/checkpoint"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// golden is what an export is pinned to: the child's config.json (as JSON),
// its files, and every tensor's dtype, shape and sha256.
type golden struct {
	Config  map[string]any          `json:"config"`
	Files   []string                `json:"files"`
	Tensors map[string]goldenTensor `json:"tensors"`
}

type goldenTensor struct {
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	SHA256 string  `json:"sha256"`
}

// TestGolden pins complete exports (config, file layout, tensor hashes) of
// one plan per format; run with -update after an intended change and review
// the diff.
func TestGolden(t *testing.T) {
	ss := synths()
	cases := []struct {
		name   string
		synth  synth
		plan   Plan
		engine string
	}{
		{"nemotron-h-native", ss[5], Plan{Version: 1, Hidden: seqFrom(4, 24), Layers: []LayerPlan{
			{Layer: 0, MambaHeads: ints(0, 2, 5, 6)}, {Layer: 1, Heads: ints(0, 2)}, {Layer: 2, MambaHeads: ints(1, 3, 4, 7)},
			{Layer: 3, Remove: true}, {Layer: 4, MambaHeads: ints(0, 1, 4, 5)}, {Layer: 5, Neurons: seqFrom(3, 20)},
		}}, "vllm"},
		{"llama-decilm", ss[0], Plan{Version: 1, OutputFormat: FormatDeciLM, Layers: []LayerPlan{
			{Layer: 0, Neurons: seqFrom(0, 30), Heads: ints(0, 2, 4, 6)}, {Layer: 1, RemoveAttention: true},
			{Layer: 2, KVHeads: ints(0, 3), Heads: ints(0, 1, 6, 7)}, {Layer: 3, RemoveMLP: true, Heads: ints(1, 3, 5, 7)},
		}}, "vllm"},
		{"llama-sharded-padded", ss[2], Plan{Version: 1, OutputFormat: FormatPadded, Hidden: seqFrom(0, 24), Layers: []LayerPlan{
			{Layer: 0, Neurons: seqFrom(0, 30)}, {Layer: 1, Heads: ints(0, 2, 4, 6)}, {Layer: 2, Remove: true}, {Layer: 3, RemoveMLP: true},
		}}, "sglang"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, _ := writeSynth(t, c.synth)
			plan := c.plan
			out, _ := runPrune(t, dir, &plan, c.engine)
			got := goldenOf(t, out)
			path := filepath.Join("testdata", "golden", c.name+".json")
			if *update {
				b, err := json.MarshalIndent(got, "", "  ")
				must(t, err)
				must(t, os.MkdirAll(filepath.Dir(path), 0o755))
				must(t, os.WriteFile(path, append(b, '\n'), 0o644))
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./prune -run TestGolden -update)", err)
			}
			var want golden
			must(t, json.Unmarshal(b, &want))
			// Compare through JSON so that number types agree.
			gb, _ := json.Marshal(got)
			var gotJ golden
			must(t, json.Unmarshal(gb, &gotJ))
			if !reflect.DeepEqual(gotJ.Config, want.Config) {
				t.Errorf("config.json differs from %s:\n got %s", path, gb)
			}
			if !reflect.DeepEqual(gotJ.Files, want.Files) {
				t.Errorf("files %v, want %v", gotJ.Files, want.Files)
			}
			for name, w := range want.Tensors {
				if g, ok := gotJ.Tensors[name]; !ok || !reflect.DeepEqual(g, w) {
					t.Errorf("tensor %s: got %+v, want %+v", name, g, w)
				}
			}
			if len(gotJ.Tensors) != len(want.Tensors) {
				t.Errorf("%d tensors, want %d", len(gotJ.Tensors), len(want.Tensors))
			}
		})
	}
}

func goldenOf(t *testing.T, dir string) golden {
	t.Helper()
	var g golden
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	must(t, err)
	must(t, json.Unmarshal(fixNonFinite(b), &g.Config))
	ents, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range ents {
		g.Files = append(g.Files, e.Name())
	}
	sort.Strings(g.Files)
	r, err := checkpoint.Open(dir)
	must(t, err)
	defer r.Close()
	g.Tensors = map[string]goldenTensor{}
	for _, ti := range r.Tensors() {
		data, err := r.Bytes(ti.Name)
		must(t, err)
		sum := sha256.Sum256(data)
		g.Tensors[ti.Name] = goldenTensor{DType: string(ti.DType), Shape: ti.Shape, SHA256: hex.EncodeToString(sum[:])}
	}
	return g
}

// fixNonFinite quotes bare Infinity/NaN (Python JSON) for encoding/json.
func fixNonFinite(b []byte) []byte {
	s := string(b)
	for _, tok := range []string{"-Infinity", "Infinity", "NaN"} {
		s = replaceBare(s, tok)
	}
	return []byte(s)
}

func replaceBare(s, tok string) string {
	out := []byte{}
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' && (i == 0 || s[i-1] != '\\') {
			inStr = !inStr
		}
		if !inStr && len(s)-i >= len(tok) && s[i:i+len(tok)] == tok && (i == 0 || s[i-1] != '-' || tok[0] == '-') {
			out = append(out, '"')
			out = append(out, tok...)
			out = append(out, '"')
			i += len(tok) - 1
			continue
		}
		out = append(out, c)
	}
	return string(out)
}
