package export

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestRemoteCodeImports: relative imports are followed as transformers'
// get_relative_imports finds them (import .x alone on a line, from .x
// import ...), recursively, each file once; an absent file is listed and
// not followed; absolute imports and mentions in other lines are not
// imports.
func TestRemoteCodeImports(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"configuration_decilm.py": "from transformers import LlamaConfig\nfrom .block_config import BlockConfig\n" +
			"    from .rope_utils import x  # indented, inside a function\n# from .commented is a comment, not at the line start\n",
		"block_config.py": "import copy\nimport .helpers\nfrom .configuration_decilm import DeciLMConfig  # a cycle\n",
		"rope_utils.py":   "from .missing_module import y\n",
		"helpers.py":      "text = 'from .not_code import z'\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := RemoteCodeImports(dir, "configuration_decilm.py")
	if err != nil {
		t.Fatal(err)
	}
	want := []RemoteImport{
		{File: "block_config.py", By: "configuration_decilm.py", Present: true},
		{File: "rope_utils.py", By: "configuration_decilm.py", Present: true},
		{File: "helpers.py", By: "block_config.py", Present: true},
		{File: "missing_module.py", By: "rope_utils.py", Present: false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if _, err := RemoteCodeImports(dir, "absent.py"); err == nil {
		t.Error("an unreadable module is no error")
	}
}

// TestValidateRemoteCodeImports: the remote-code check of a DeciLM child
// follows the auto_map modules' relative imports, and hf (which builds the
// model class through transformers' Auto classes) needs an
// auto_map.AutoModelForCausalLM where the serving engines need only the
// configuration.
func TestValidateRemoteCodeImports(t *testing.T) {
	cfgOnly := deciConfig(func(c map[string]any, b []map[string]any) {
		c["auto_map"] = map[string]any{"AutoConfig": "configuration_decilm.DeciLMConfig"}
	})
	conf := []byte("from transformers import LlamaConfig\nfrom .block_config import BlockConfig\n")
	block := []byte("import copy\n")
	model := []byte("from .configuration_decilm import DeciLMConfig\nfrom .transformers_4_44_2__modeling_rope_utils import R\n")
	cases := []struct {
		name  string
		cfg   []byte
		files map[string][]byte
		hf    string // "" = OK, else a text the hf violation contains
	}{
		{"configuration only", cfgOnly, map[string][]byte{"configuration_decilm.py": conf, "block_config.py": block}, "auto_map.AutoModelForCausalLM"},
		{"imported module missing", cfgOnly, map[string][]byte{"configuration_decilm.py": conf}, "imports block_config.py relatively"},
		{"modeling module's import missing", deciConfig(nil), map[string][]byte{"configuration_decilm.py": conf, "block_config.py": block, "modeling_decilm.py": model},
			"modeling_decilm.py (named by auto_map.AutoModelForCausalLM) imports transformers_4_44_2__modeling_rope_utils.py"},
		{"complete", deciConfig(nil), map[string][]byte{"configuration_decilm.py": conf, "block_config.py": block, "modeling_decilm.py": model,
			"transformers_4_44_2__modeling_rope_utils.py": []byte("import math\n")}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeDeci(t, c.cfg, nil, c.files)
			r, err := ValidateDir(dir, "hf")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, v := range r.Violations {
				found = found || v.Rule == "remote-code" && c.hf != "" && strings.Contains(v.Msg, c.hf)
			}
			switch {
			case c.hf == "" && !r.OK():
				t.Errorf("hf: %v", r.Err())
			case c.hf != "" && !found:
				t.Errorf("hf: got %v, want a remote-code violation containing %q", r.Violations, c.hf)
			}
		})
	}
}
