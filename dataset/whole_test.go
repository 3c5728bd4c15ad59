package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/autocompress/autocompress/parent"
)

// TestReadWhole: each kind of source reads as a perplexity measurement
// scores it.
func TestReadWhole(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "t.txt")
	os.WriteFile(text, []byte("Some held-out text.\r\n"), 0o644)
	ids := filepath.Join(dir, "x.ids")
	os.WriteFile(ids, []byte("1 2 3\n4 5\n"), 0o644)
	d, err := ReadWhole(text, ".", false)
	if err != nil || string(d.Text) != "Some held-out text.\r\n" || d.IDs != nil || d.Name != text {
		t.Errorf("text file: %+v, %v; want the bytes as they are", d, err)
	}
	d, err = ReadWhole(ids, ".", false)
	if err != nil || d.Text != nil || !reflect.DeepEqual(d.IDs, [][]int{{1, 2, 3}, {4, 5}}) {
		t.Errorf("id file: %+v, %v", d, err)
	}
	want, err := parent.SplitText(".", "test")
	if err != nil {
		t.Fatal(err)
	}
	d, err = ReadWhole("parent:test", ".", false)
	if err != nil || string(d.Text) != want || d.Name != "parent:test" {
		t.Errorf("parent:test: %v; want the %d bytes of the embedded split", err, len(want))
	}
	if _, err := ReadWhole("parent:nope", ".", false); !errors.As(err, new(*parent.UnknownSplitError)) {
		t.Errorf("unknown split: %v", err)
	}
	if _, err := ReadWhole(filepath.Join(dir, "none.txt"), ".", false); err == nil {
		t.Error("missing file: no error")
	}
}
