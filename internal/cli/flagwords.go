package cli

import (
	"errors"
	"strings"

	"github.com/autocompress/autocompress/search"
)

// flagOf maps the names by which library errors refer to budgets and
// settings to the flags (or command) a user of this command line writes.
// The library owns the names; this table is the one place they meet the
// flags. A name not listed is printed as it is.
var flagOf = map[string]string{
	search.BudgetMemory:       "--max-memory",
	search.BudgetTTFT:         "--max-ttft",
	search.BudgetTPOT:         "--max-tpot",
	search.BudgetE2E:          "--max-e2e",
	search.BudgetThroughput:   "--min-throughput",
	search.BudgetParams:       "--max-params",
	search.BudgetActiveParams: "--max-active-params",
	search.SettingPrecision:   "--precision",
	search.SettingContext:     "--context",
	search.SettingTP:          "--tp",
	search.SettingKVDType:     "--kv-dtype",
	search.SettingMaxNumSeqs:  "--max-num-seqs",
	search.SettingMargin:      "--margin",
	search.SettingP90:         "--p90",
	search.SettingKeepLayers:  "--keep-layers",
	"device-file":             "--gpu-file",
	"task":                    "--task",
	"seq-len":                 "--seq-len",
	"tokenizer":               "--tokenizer",
	"ids":                     "--ids",
	"list-models":             "autocompress inspect --model list",
}

// spellFlag spells a library name as its flag.
func spellFlag(name string) string {
	if f, ok := flagOf[name]; ok {
		return f
	}
	return name
}

// spelled is a library error whose message names settings, and which can
// say it again with them spelled as flags.
type spelled interface {
	error
	Spell(spell func(name string) string) string
}

// inFlags returns err's message with the library error in its chain that
// names settings (one with a Spell method) spelled as this command line's
// flags; the text wrapped around it is kept.
func inFlags(err error) string {
	msg := err.Error()
	var s spelled
	if errors.As(err, &s) {
		msg = strings.Replace(msg, s.Error(), s.Spell(spellFlag), 1)
	}
	return msg
}
