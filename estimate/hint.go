package estimate

import "strings"

// Settings of a deployment that hints name (the library's names; a
// command spells them as its flags or fields).
const (
	SettingPrecision  = "precision"
	SettingContext    = "context"
	SettingTP         = "tp"
	SettingKVDType    = "kv-dtype"
	SettingMaxNumSeqs = "max-num-seqs"
)

// A Hint is one change that would make a deployment fit or a search
// feasible: Text in words; Setting, the deployment setting it changes (""
// for none), with Values it might take (Example: they are examples) or
// Drop when the change is to turn the setting off; Note says more.
type Hint struct {
	Text, Setting, Values string
	Example, Drop         bool
	Note                  string
}

// Spell returns the hint with its setting spelled by spell (a command's
// flag); nil gives the hint's words and values alone, naming no flag.
func (h Hint) Spell(spell func(name string) string) string {
	var parts []string
	switch {
	case spell != nil && h.Setting != "" && h.Drop:
		parts = append(parts, "drop "+spell(h.Setting))
	case spell != nil && h.Setting != "" && h.Values != "":
		parts = append(parts, spell(h.Setting)+" "+h.Values)
	case spell != nil && h.Setting != "":
		parts = append(parts, spell(h.Setting))
	case h.Values != "":
		parts = append(parts, h.Values)
	}
	if len(parts) > 0 && h.Example {
		parts[0] = "e.g. " + parts[0]
	}
	if h.Note != "" {
		parts = append(parts, h.Note)
	}
	if len(parts) == 0 {
		return h.Text
	}
	return h.Text + " (" + strings.Join(parts, "; ") + ")"
}

// words makes hints of plain words, naming no setting.
func words(texts ...string) []Hint {
	out := make([]Hint, len(texts))
	for i, t := range texts {
		out[i] = Hint{Text: t}
	}
	return out
}
