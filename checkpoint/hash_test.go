package checkpoint

import (
	"testing"
	"testing/fstest"
)

// TestHashFiles: the hash keys on names, lengths and contents, so moving a
// byte across a file boundary, renaming a file or changing a byte all change
// it, and it is the same for the same files.
func TestHashFiles(t *testing.T) {
	hash := func(files map[string]string, names ...string) string {
		t.Helper()
		m := fstest.MapFS{}
		for n, c := range files {
			m[n] = &fstest.MapFile{Data: []byte(c)}
		}
		h, err := HashFiles(m, names)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := hash(map[string]string{"a": "xy", "b": "z"}, "a", "b")
	if again := hash(map[string]string{"a": "xy", "b": "z"}, "a", "b"); again != base {
		t.Errorf("same files, hashes %s and %s", base, again)
	}
	for name, other := range map[string]string{
		"a byte moved across the boundary": hash(map[string]string{"a": "x", "b": "yz"}, "a", "b"),
		"a file renamed":                   hash(map[string]string{"a": "xy", "c": "z"}, "a", "c"),
		"a byte changed":                   hash(map[string]string{"a": "xy", "b": "Z"}, "a", "b"),
		"another order":                    hash(map[string]string{"a": "xy", "b": "z"}, "b", "a"),
	} {
		if other == base {
			t.Errorf("%s: the hash did not change", name)
		}
	}
	if _, err := HashFiles(fstest.MapFS{}, []string{"missing"}); err == nil {
		t.Error("a missing file: no error")
	}
}
