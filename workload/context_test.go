package workload

import (
	"errors"
	"strings"
	"testing"
)

func TestFitContext(t *testing.T) {
	chat, _ := Preset("chat")
	for _, tc := range []struct {
		name      string
		w         Workload
		rule      ContextRule
		tokens    int
		source    string
		clipped   bool
		long      bool
		err, clip bool
	}{
		{"fixed fits", FixedClosed(1000, 100, 1), ContextRule{MaxPositions: 4096}, 1100, "input + output", false, false, false, false},
		{"fixed over", FixedClosed(200000, 128, 1), ContextRule{MaxPositions: 131072}, 0, "", false, false, true, false},
		{"fixed over, allowed", FixedClosed(200000, 128, 1), ContextRule{MaxPositions: 131072, AllowLong: true}, 200128, "input + output", false, true, false, false},
		{"unknown positions", FixedClosed(200000, 128, 1), ContextRule{}, 200128, "input + output", false, false, false, false},
		{"preset limit", chat, ContextRule{MaxPositions: 131072}, 16384, "the chat workload's limit", false, false, false, false},
		{"preset capped, requests fit", chat, ContextRule{MaxPositions: 12288}, 12288, "max_position_embeddings", false, false, false, false},
		{"preset clipped by the model", chat, ContextRule{MaxPositions: 512}, 0, "", false, false, true, true},
		{"preset, allowed long", chat, ContextRule{MaxPositions: 512, AllowLong: true}, 16384, "the chat workload's limit", false, true, false, false},
		{"explicit clip", func() Workload { w := chat; w.ContextLimit = 512; return w }(), ContextRule{MaxPositions: 512, Explicit: true}, 512, "set by the user", true, false, false, false},
		{"explicit over", func() Workload { w := chat; w.ContextLimit = 4096; return w }(), ContextRule{MaxPositions: 512, Explicit: true}, 0, "", false, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.w
			tc.rule.AllowFlag = "--allow-long-context"
			c, err := w.FitContext(tc.rule)
			var ce *ContextError
			if tc.err {
				if !errors.As(err, &ce) || ce.Clip != tc.clip || !strings.Contains(err.Error(), "--allow-long-context") {
					t.Fatalf("err %v; want a *ContextError (clip %v) naming --allow-long-context", err, tc.clip)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Tokens != tc.tokens || !strings.Contains(c.Source, tc.source) || c.Clipped != tc.clipped || c.Long != tc.long || w.ContextLimit != c.Tokens {
				t.Errorf("got %+v (limit %d); want %d tokens from %q, clipped %v, long %v", c, w.ContextLimit, tc.tokens, tc.source, tc.clipped, tc.long)
			}
		})
	}
}

// TestContextErrorOffersOnlyGivenOptions: the message offers the caller's
// options (a flag, a config field) and none it was not given, so a command
// without an override is not told to pass one.
func TestContextErrorOffersOnlyGivenOptions(t *testing.T) {
	chat, _ := Preset("chat")
	for _, tc := range []struct {
		w    Workload
		rule ContextRule
		want []string
		not  []string
	}{
		{FixedClosed(200000, 128, 1), ContextRule{MaxPositions: 131072}, []string{"requests need 200128 tokens", "shorten it"}, []string{"--", "pass"}},
		{FixedClosed(200000, 128, 1), ContextRule{MaxPositions: 131072, AllowFlag: "--allow"}, []string{"pass --allow"}, nil},
		{chat, ContextRule{MaxPositions: 512}, []string{"give a shorter workload"}, []string{"--", "pass", "explicitly"}},
		{chat, ContextRule{MaxPositions: 512, ContextFlag: "--context", AllowFlag: "--allow"}, []string{"(--context N) to clip them knowingly or pass --allow"}, nil},
	} {
		w := tc.w
		_, err := w.FitContext(tc.rule)
		if err == nil {
			t.Fatalf("%+v: no error", tc.rule)
		}
		for _, s := range tc.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%+v: %q lacks %q", tc.rule, err, s)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%+v: %q offers %q", tc.rule, err, s)
			}
		}
	}
}
