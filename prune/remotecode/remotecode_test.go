package remotecode

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestDeciLMFiles: the embedded module is the configuration file auto_map
// names plus the one it imports, WriteDeciLM writes exactly those, and an
// unknown name is an error naming the files there are.
func TestDeciLMFiles(t *testing.T) {
	want := []string{"block_config.py", "configuration_decilm.py"}
	if got := DeciLMFiles(); !reflect.DeepEqual(got, want) {
		t.Fatalf("DeciLMFiles %v, want %v", got, want)
	}
	dir := t.TempDir()
	if err := WriteDeciLM(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range want {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		emb, _ := DeciLMFile(f)
		if !bytes.Equal(got, emb) || len(got) == 0 {
			t.Errorf("%s written differently from the embedded file", f)
		}
	}
	if _, err := DeciLMFile("modeling_decilm.py"); err == nil || !strings.Contains(err.Error(), "configuration_decilm.py") {
		t.Errorf("unknown file: %v", err)
	}
	module, class, _ := strings.Cut(DeciLMAutoConfig, ".")
	src, err := DeciLMFile(module + ".py")
	if err != nil {
		t.Fatalf("auto_map.AutoConfig %s names a module not embedded: %v", DeciLMAutoConfig, err)
	}
	if !bytes.Contains(src, []byte("class "+class+"(LlamaConfig):")) {
		t.Errorf("%s.py defines no %s on LlamaConfig", module, class)
	}
}

// TestDeciLMImports: transformers' check_imports
// (dynamic_module_utils.py) refuses a remote-code module whose absolute
// imports are not installed, and the serving engines' environments have
// transformers and the standard library only; every relative import must
// be one of the embedded files.
func TestDeciLMImports(t *testing.T) {
	abs := regexp.MustCompile(`(?m)^\s*import\s+(\S+)\s*$|^\s*from\s+(\S+)\s+import`)
	allowed := map[string]bool{"transformers": true, "copy": true}
	have := map[string]bool{}
	for _, f := range DeciLMFiles() {
		have[strings.TrimSuffix(f, ".py")] = true
	}
	var rel []string
	for _, f := range DeciLMFiles() {
		src, _ := DeciLMFile(f)
		for _, m := range abs.FindAllStringSubmatch(string(src), -1) {
			imp := m[1] + m[2]
			if mod, ok := strings.CutPrefix(imp, "."); ok {
				rel = append(rel, mod)
				if !have[mod] {
					t.Errorf("%s imports .%s, which is not embedded", f, mod)
				}
				continue
			}
			if top, _, _ := strings.Cut(imp, "."); !allowed[top] {
				t.Errorf("%s imports %s: transformers' check_imports needs it installed wherever the child is loaded", f, imp)
			}
		}
	}
	sort.Strings(rel)
	if !reflect.DeepEqual(rel, []string{"block_config"}) {
		t.Errorf("relative imports %v, want [block_config]", rel)
	}
}
