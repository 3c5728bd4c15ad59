package pipeline

import (
	"context"
	"errors"
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
