package parent

import (
	"errors"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/internal/shareddata"
)

// TestSplitText: the named splits have the sizes README.md gives, and an
// unknown name says which are known.
func TestSplitText(t *testing.T) {
	root, _ := shareddata.ModuleRoot()
	test, err := SplitText(root, "test")
	if errors.Is(err, corpus.ErrMissing) {
		t.Skipf("corpus absent: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	val, err := SplitText(root, "val")
	if err != nil {
		t.Fatal(err)
	}
	if len(test) != 864820 || len(val) != 784378 {
		t.Errorf("test %d bytes, validation %d; README.md says 864,820 and 784,378", len(test), len(val))
	}
	if _, err := SplitText(root, "dev"); err == nil || !strings.Contains(err.Error(), "want train, validation or test") {
		t.Errorf("unknown split: %v", err)
	}
}
