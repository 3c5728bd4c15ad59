package architecture

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata"
)

// FuzzFromConfig feeds arbitrary bytes to FromConfig. Seeds: the hand-written
// configs in testdata/seeds and, when present, every real config of the
// shared folder. Whatever is accepted must validate, list tensors whose
// element count is Params().Total, and either write back (in the format
// FormatFor picks) to a config that reads back to the same model or be
// refused with a *FormatError that says why.
func FuzzFromConfig(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "seeds", "*.json"))
	if dir, ok := shareddata.Path("configs"); ok {
		real, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		seeds = append(seeds, real...)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":-Infinity}`))
	f.Add([]byte(`{"architectures":["Qwen3ForCausalLM"],"hidden_size":8,"intermediate_size":8,"num_attention_heads":1,"num_hidden_layers":1,"vocab_size":1,"rope_theta":NaN}`))
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":4194304,"intermediate_size":4194304,"num_attention_heads":1,"num_hidden_layers":4096,"vocab_size":16777216}`))
	f.Add([]byte(`{"architectures":["MistralForCausalLM"],"hidden_size":1,"intermediate_size":1,"num_attention_heads":1,"num_hidden_layers":1,"vocab_size":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := FromConfig(data)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted but invalid: %v", err)
		}
		var sum int64
		for _, s := range m.Tensors() {
			sum += s.Numel()
		}
		p := m.Params()
		if sum != p.Total || p.Active > p.Total || p.Active <= 0 {
			t.Fatalf("tensors hold %d, Params %+v", sum, p)
		}
		out, err := m.Config(ConfigOptions{})
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("Config failed without a FormatError: %v", err)
			}
			return
		}
		back, err := FromConfig(out)
		if err != nil {
			t.Fatalf("written config does not read back: %v\n%s", err, out)
		}
		if back.Arch == m.Arch && !sameModel(m, back) {
			t.Fatalf("round trip changed the model: %s\n%s", diffModel(m, back), out)
		}
	})
}

// TestSeedsRoundTrip requires the hand-written seeds to be accepted and to
// round-trip (no FormatError), so the fuzz corpus starts from good inputs.
func TestSeedsRoundTrip(t *testing.T) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "seeds", "*.json"))
	if len(seeds) < 5 {
		t.Fatalf("only %d seeds", len(seeds))
	}
	for _, s := range seeds {
		t.Run(filepath.Base(s), func(t *testing.T) {
			m, err := Load(s)
			if err != nil {
				t.Fatal(err)
			}
			back, _ := roundTrip(t, m, ConfigOptions{})
			if !sameModel(m, back) {
				t.Errorf("changed: %s", diffModel(m, back))
			}
		})
	}
}
