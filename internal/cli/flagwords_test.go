package cli

import (
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/search"
)

// TestFlagOfNamesRealFlags: every budget kind and every search setting the
// library's errors name is spelled as a flag, and each "--" entry of the
// table is a flag some command registers.
func TestFlagOfNamesRealFlags(t *testing.T) {
	registered := map[string]bool{}
	for _, c := range commands {
		fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
		c.Flags(fs)
		fs.VisitAll(func(f *flag.Flag) { registered["--"+f.Name] = true })
	}
	names := []string{search.SettingPrecision, search.SettingContext, search.SettingTP, search.SettingKVDType,
		search.SettingMaxNumSeqs, search.SettingMargin, search.SettingP90, search.SettingKeepLayers}
	for _, k := range search.BudgetKinds {
		names = append(names, k.Name)
	}
	for _, n := range names {
		if _, ok := flagOf[n]; !ok {
			t.Errorf("the library names %q, which flagOf does not spell", n)
		}
	}
	var keys []string
	for n := range flagOf {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	for _, n := range keys {
		if f := flagOf[n]; strings.HasPrefix(f, "--") && !registered[f] {
			t.Errorf("flagOf spells %q as %s, which no command registers", n, f)
		}
	}
}

// TestInFlags: a library error wrapped in context is printed with its
// settings spelled as flags and the context kept; other errors as they are.
func TestInFlags(t *testing.T) {
	err := fmt.Errorf("reading the data: %w", &dataset.NoTokenizerError{Dir: "m"})
	if got, want := inFlags(err), "reading the data: the model directory m has no tokenizer.json: pass --tokenizer, or token ids with --ids"; got != want {
		t.Errorf("inFlags = %q, want %q", got, want)
	}
	if strings.Contains(err.Error(), "--") {
		t.Errorf("the library's own message names a flag: %q", err)
	}
	_, err = search.ParseBudgets(search.BudgetText{MaxTTFT: "2s", MaxE2E: "1s"})
	if got := Usagef("%v", err).Error(); got != "--max-ttft 2s exceeds --max-e2e 1s: the first token cannot come after the last" {
		t.Errorf("Usagef = %q", got)
	}
	if got := inFlags(errors.New("plain")); got != "plain" {
		t.Errorf("inFlags(plain) = %q", got)
	}
}
