package search

import (
	"testing"

	"github.com/autocompress/autocompress/estimate"
)

// TestMaxDepthZeroRemovesNoLayer: an explicit MaxDepth of 0 is 0 (no layer
// may be removed), not the default; unset, half the layers may go.
func TestMaxDepthZeroRemovesNoLayer(t *testing.T) {
	_, small := smallSpace(t)
	m := small.Parent
	if len(m.Layers) < 4 {
		t.Fatalf("the small space's parent has %d layers: too few to tell the depths apart", len(m.Layers))
	}
	for _, tc := range []struct {
		depth *float64
		want  int
	}{
		{Ptr(0.0), 0},
		{nil, len(m.Layers) / 2},
		{Ptr(0.25), len(m.Layers) / 4},
	} {
		sp, err := NewSpace(m, SpaceOptions{Engine: estimate.Native, MaxDepth: tc.depth})
		if err != nil {
			t.Fatal(err)
		}
		if sp.MaxRemoved != tc.want {
			t.Errorf("MaxDepth %v: at most %d layers removed, want %d", tc.depth, sp.MaxRemoved, tc.want)
		}
	}
	if _, err := NewSpace(m, SpaceOptions{Engine: estimate.Native, MaxDepth: Ptr(-0.5)}); err == nil {
		t.Error("a negative MaxDepth was accepted")
	}
}
