package architecture

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed presets/*.json
var presetFS embed.FS

// presetFile maps a HuggingFace id to its file name under presets/:
// "meta-llama/Llama-3.1-8B" is stored as "meta-llama--Llama-3.1-8B.json".
func presetFile(id string) string { return strings.ReplaceAll(id, "/", "--") + ".json" }

// Presets returns the names (HuggingFace ids) of the built-in presets, sorted.
func Presets() []string {
	entries, err := fs.ReadDir(presetFS, "presets")
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if ok {
			out = append(out, strings.ReplaceAll(name, "--", "/"))
		}
	}
	sort.Strings(out)
	return out
}

// Preset returns the built-in model named by a HuggingFace id, matched
// case-insensitively ("meta-llama/llama-3.1-8b"). The error lists the presets.
func Preset(name string) (*Model, error) {
	for _, p := range Presets() {
		if strings.EqualFold(p, name) {
			data, err := presetFS.ReadFile(path.Join("presets", presetFile(p)))
			if err != nil {
				return nil, fmt.Errorf("preset %s: %w", p, err)
			}
			m, err := FromConfig(data)
			if err != nil {
				return nil, fmt.Errorf("preset %s: %w", p, err)
			}
			m.Name = p
			return m, nil
		}
	}
	return nil, fmt.Errorf("unknown preset %q; presets: %s", name, strings.Join(Presets(), ", "))
}
