package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRowsNameTheField: the stages read their data through dataset.Rows;
// a row longer than the parent's positions is a ConfigError naming the
// field that set it, and rows hold seq_len+1 ids.
func TestRowsNameTheField(t *testing.T) {
	c := DemoConfig()
	tg, err := resolve(&c)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := rows(context.Background(), tg, []string{"parent:validation"}, c.Assets, 64, 3, "importance.seq_len")
	if err != nil {
		t.Fatal(err)
	}
	if len(rr) != 3 || len(rr[0]) != 65 {
		t.Errorf("%d rows of %d ids; want 3 of 65", len(rr), len(rr[0]))
	}
	_, err = rows(context.Background(), tg, []string{"parent:validation"}, c.Assets, tg.arch.MaxPositions+1, 3, "importance.seq_len")
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Path != "importance.seq_len" || !strings.Contains(ce.Msg, "positions") {
		t.Errorf("seq_len past the positions: %v, want a ConfigError for importance.seq_len", err)
	}
}

// TestBudgetErrorsNameTheField: budgets are read by search.ParseBudgets,
// and each error is a ConfigError naming the field.
func TestBudgetErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		b    Budgets
		want string
	}{
		{Budgets{MaxMemory: "12 parsecs"}, "budgets.max_memory"},
		{Budgets{MaxTTFT: "soon"}, "budgets.max_ttft"},
		{Budgets{MaxTPOT: "3"}, "budgets.max_tpot"},
		{Budgets{MaxE2E: "1h"}, "budgets.max_e2e"},
		{Budgets{MinThroughput: "lots"}, "budgets.min_throughput"},
		{Budgets{MaxParams: "3Q"}, "budgets.max_params"},
		{Budgets{MaxTTFT: "2s", MaxE2E: "1s"}, "budgets.max_ttft"},
		{Budgets{MaxMemory: "1GiB", P90: true}, "budgets.p90"},
		{Budgets{}, "budgets"},
	} {
		_, err := tc.b.parse(false)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Path != tc.want {
			t.Errorf("%+v: %v, want a ConfigError for %s", tc.b, err, tc.want)
		}
	}
	got, err := Budgets{MaxMemory: "45MiB", MaxTPOT: "3ms", P90: true}.parse(false)
	if err != nil || got.MaxMemory != 45<<20 || got.MaxTPOT != 3e-3 || !got.P90 {
		t.Errorf("%+v, %v", got, err)
	}
}

// TestRunRefusesUnknownUntil: Until must name a stage; the error lists
// them, and nothing is created.
func TestRunRefusesUnknownUntil(t *testing.T) {
	st, err := Stages(DemoConfig(), "")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	_, err = Run(context.Background(), dir, st, Options{Until: "polish"})
	var ue *UntilError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "importance, search") {
		t.Fatalf("%v, want an UntilError listing the stages", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the run directory was created: %v", err)
	}
	if err := checkUntil(st, "search"); err != nil {
		t.Errorf("a real stage: %v", err)
	}
}
