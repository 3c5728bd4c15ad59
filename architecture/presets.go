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

// presetAliases maps other names of a preset (HF renames) to its id.
var presetAliases = map[string]string{
	"meta-llama/llama-3.1-8b":   "meta-llama/Meta-Llama-3.1-8B",
	"meta-llama/llama-3.1-70b":  "meta-llama/Meta-Llama-3.1-70B",
	"meta-llama/llama-3.1-405b": "meta-llama/Meta-Llama-3.1-405B",
	"meta-llama/llama-3-8b":     "meta-llama/Meta-Llama-3-8B",
}

// resolvePreset returns the preset id for name: an exact id (any case), an
// alias, or the part after the slash when exactly one preset has it
// ("qwen3-8b").
func resolvePreset(name string) (string, bool) {
	names := Presets()
	for _, p := range names {
		if strings.EqualFold(p, name) {
			return p, true
		}
	}
	if p, ok := presetAliases[strings.ToLower(name)]; ok {
		return p, true
	}
	if strings.Contains(name, "/") {
		return "", false
	}
	found := ""
	for _, p := range names {
		if _, short, _ := strings.Cut(p, "/"); strings.EqualFold(short, name) {
			if found != "" {
				return "", false
			}
			found = p
		}
	}
	return found, found != ""
}

// Preset returns the built-in model named by a HuggingFace id, matched
// case-insensitively ("meta-llama/llama-3.1-8b"); the part after the slash
// alone also works when it is unambiguous ("Qwen3-8B"). The error lists the
// presets.
func Preset(name string) (*Model, error) {
	p, ok := resolvePreset(name)
	if !ok {
		return nil, fmt.Errorf("unknown preset %q; presets: %s", name, strings.Join(Presets(), ", "))
	}
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
