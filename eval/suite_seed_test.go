package eval

import (
	"errors"
	"reflect"
	"testing"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/parent"
)

// TestSuiteSeedZeroIsASeed: an explicit seed 0 builds seed 0's suite (eval
// --build --seed 0 used to build seed 1's); unset, the seed is 1.
func TestSuiteSeedZeroIsASeed(t *testing.T) {
	root, _ := shareddata.ModuleRoot()
	text, err := parent.SplitText(root, "test")
	if errors.Is(err, corpus.ErrMissing) {
		t.Skipf("corpus absent (scripts/fetch-assets.sh): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	text = text[:min(len(text), 20_000)]
	build := func(seed *uint64) []SuiteItem {
		t.Helper()
		s, err := BuildSuite(text, SuiteOptions{Seed: seed, Cloze: 8, Choice: 8})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	zero, one := uint64(0), uint64(1)
	if reflect.DeepEqual(build(&zero), build(&one)) {
		t.Error("seed 0 built seed 1's suite")
	}
	if !reflect.DeepEqual(build(nil), build(&one)) {
		t.Error("the unset seed is not 1")
	}
	if !reflect.DeepEqual(build(&zero), build(&zero)) {
		t.Error("seed 0 is not reproducible")
	}
}
