package browsertest

import (
	"strings"
	"testing"
)

// TestProblems: each thing a person would struggle with is found, from the
// boxes alone (no browser), and a clean chart has none.
func TestProblems(t *testing.T) {
	sans := "\"Liberation Sans\", Arial, Helvetica, sans-serif"
	chart := func(parts ...Part) *Layout {
		return &Layout{Content: 1100, Charts: []Chart{{ID: "c", Box: Box{0, 0, 1100, 400}, Parts: parts}}}
	}
	point := Part{Box: Box{500, 100, 8, 8}, Role: "data", Tag: "path"}
	legend := Part{Box: Box{100, 10, 120, 16}, Role: "legend", Tag: "text", Text: "chosen", Font: sans}
	tick := Part{Box: Box{20, 200, 30, 16}, Role: "axis", Tag: "text", Text: "0.5", Font: sans}
	budget := Part{Box: Box{60, 150, 1000, 0}, Role: "line", Tag: "path"} // a horizontal line: no height
	if p := chart(point, legend, tick, budget).Problems(); len(p) > 0 {
		t.Fatalf("a clean chart: %v", p)
	}
	for _, tc := range []struct {
		name string
		lay  *Layout
		want string
	}{
		{"legend over a point", chart(point, Part{Box: Box{495, 98, 60, 16}, Role: "legend", Tag: "text", Text: "chosen", Font: sans}), `legend text "chosen" covers data path`},
		{"label over a budget line", chart(budget, Part{Box: Box{300, 143, 30, 16}, Role: "label", Tag: "text", Text: "41.5", Font: sans}), `label text "41.5" covers line path`},
		{"texts overlap", chart(tick, Part{Box: Box{40, 205, 30, 16}, Role: "axis", Tag: "text", Text: "layer", Font: sans}), `texts text "0.5" and text "layer" overlap`},
		{"small type", chart(Part{Box: Box{20, 200, 30, 10}, Role: "axis", Tag: "text", Text: "0.5", Font: sans}), "is 10.0 px high"},
		{"serif type", chart(Part{Box: Box{20, 200, 30, 16}, Role: "axis", Tag: "text", Text: "0.5", Font: "Liberation Serif"}), "is set in Liberation Serif"},
		{"outside the chart", chart(Part{Box: Box{-5, 200, 30, 16}, Role: "axis", Tag: "text", Text: "memory", Font: sans}), "sticks out of the chart"},
		{"half the page", &Layout{Content: 1100, Charts: []Chart{{ID: "c", Box: Box{0, 0, 600, 400}}}}, "55 % of the page"},
	} {
		p := tc.lay.Problems()
		if !strings.Contains(strings.Join(p, "\n"), tc.want) {
			t.Errorf("%s: problems %v, want one with %q", tc.name, p, tc.want)
		}
	}
}
