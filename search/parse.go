package search

import (
	"errors"
	"fmt"
)

// BudgetText is the budgets as a user writes them: each a value with its
// unit ("13.96GiB", "40ms", "2000tok/s", "3B"), "" for no budget. The
// search command's flags and the pipeline's budgets section both fill it.
type BudgetText struct {
	MaxMemory, MaxTTFT, MaxTPOT, MaxE2E string
	MinThroughput                       string
	MaxParams, MaxActiveParams          string
	// P90 applies the latency budgets to the p90 instead of the mean.
	P90 bool
}

// BudgetError is a budget that cannot be read (Err is a *UnitError) or
// that contradicts another; Budget is its name (BudgetMemory, …, or
// SettingP90), which a caller turns into its own spelling (a flag, a
// config field) with Spell.
type BudgetError struct {
	Budget string
	Err    error
	// text, when set, renders the message with the names spelled.
	text func(spell Speller) string
}

func (e *BudgetError) Error() string { return e.Spell(nil) }
func (e *BudgetError) Unwrap() error { return e.Err }

// Spell returns the message with the budgets spelled by spell.
func (e *BudgetError) Spell(spell func(name string) string) string {
	var ue *UnitError
	switch {
	case e.text != nil:
		return e.text(Speller(spell))
	case errors.As(e.Err, &ue):
		return ue.Spell(spell)
	}
	return e.Err.Error()
}

// contradiction is a *BudgetError of budget name whose message text
// renders with the names spelled.
func contradiction(name string, text func(spell Speller) string) *BudgetError {
	return &BudgetError{Budget: name, Err: errors.New(text(nil)), text: text}
}

// ErrNoBudget is budgets with none set.
var ErrNoBudget = errors.New("no budget given")

// ParseBudgets reads budgets with units: memory B…TiB (ParseBytes),
// latencies us…min (ParseSeconds), throughput tok/s or req/s
// (ParseThroughput), parameters K, M, B (ParseCount). A value that cannot
// be read, a TTFT budget above the E2E one and P90 without a latency
// budget are *BudgetErrors naming the budget; no budget at all is
// ErrNoBudget.
func ParseBudgets(t BudgetText) (Budgets, error) {
	var b Budgets
	for _, x := range []struct {
		name, s string
		parse   func(name, s string) error
	}{
		{BudgetMemory, t.MaxMemory, func(f, s string) (err error) { b.MaxMemory, err = ParseBytes(f, s); return }},
		{BudgetTTFT, t.MaxTTFT, func(f, s string) (err error) { b.MaxTTFT, err = ParseSeconds(f, s); return }},
		{BudgetTPOT, t.MaxTPOT, func(f, s string) (err error) { b.MaxTPOT, err = ParseSeconds(f, s); return }},
		{BudgetE2E, t.MaxE2E, func(f, s string) (err error) { b.MaxE2E, err = ParseSeconds(f, s); return }},
		{BudgetThroughput, t.MinThroughput, func(f, s string) (err error) { b.MinThroughput, err = ParseThroughput(f, s); return }},
		{BudgetParams, t.MaxParams, func(f, s string) (err error) { b.MaxParams, err = ParseCount(f, s); return }},
		{BudgetActiveParams, t.MaxActiveParams, func(f, s string) (err error) { b.MaxActiveParams, err = ParseCount(f, s); return }},
	} {
		if x.s == "" {
			continue
		}
		if err := x.parse(x.name, x.s); err != nil {
			return b, &BudgetError{Budget: x.name, Err: err}
		}
	}
	b.P90 = t.P90
	switch {
	case !b.Any():
		return b, ErrNoBudget
	case b.MaxTTFT > 0 && b.MaxE2E > 0 && b.MaxTTFT > b.MaxE2E:
		return b, contradiction(BudgetTTFT, func(sp Speller) string {
			return fmt.Sprintf("%s %s exceeds %s %s: the first token cannot come after the last", sp.spell(BudgetTTFT), t.MaxTTFT, sp.spell(BudgetE2E), t.MaxE2E)
		})
	case b.P90 && b.MaxTTFT == 0 && b.MaxTPOT == 0 && b.MaxE2E == 0:
		return b, contradiction(SettingP90, func(sp Speller) string {
			return fmt.Sprintf("%s needs a latency budget (%s, %s or %s)", sp.spell(SettingP90), sp.spell(BudgetTTFT), sp.spell(BudgetTPOT), sp.spell(BudgetE2E))
		})
	}
	return b, nil
}
