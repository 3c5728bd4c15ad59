package architecture

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/autocompress/autocompress/internal/shareddata"
)

// allModels returns every preset and, when the shared folder is present,
// every shared config, keyed by name.
func allModels(t *testing.T) map[string]*Model {
	t.Helper()
	out := map[string]*Model{}
	for _, name := range Presets() {
		m, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		out["preset "+name] = m
	}
	if dir, ok := shareddata.Path("configs"); ok {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, f := range files {
			m, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			out[f] = m
		}
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

func sprint(v any) string { return fmt.Sprintf("%+v", v) }

func describeLayer(l Layer) string {
	s := ""
	if l.Attention != nil {
		s += fmt.Sprintf("att%+v ", *l.Attention)
	}
	if l.MLP != nil {
		s += fmt.Sprintf("mlp%+v ", *l.MLP)
	}
	if l.Mamba != nil {
		s += fmt.Sprintf("mamba%+v ", *l.Mamba)
	}
	if l.MoE != nil {
		s += fmt.Sprintf("moe%+v ", *l.MoE)
	}
	return s
}
