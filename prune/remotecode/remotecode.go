// Package remotecode holds the Python configuration module that prune writes
// beside every DeciLM (nemotron-nas) child: autocompress's own code,
// embedded in the binary.
//
// transformers has no configuration class for model_type nemotron-nas, and
// vLLM, SGLang and TensorRT-LLM build a DeciLM checkpoint's config through
// transformers' AutoConfig with trust_remote_code, then read the per-layer
// block_configs as objects (block_config.attention.no_op, ...). Those objects
// exist only if config.json's auto_map.AutoConfig names a module in the
// checkpoint directory that builds them. DeciLM writes that module
// (configuration_decilm.py) and the one it imports (block_config.py);
// prune/PLAN.md lists what each engine reads and where.
//
// No modeling module is shipped: the serving engines use their own DeciLM
// model classes, selected by config.json's architectures[0], and need only
// the configuration. transformers' AutoModelForCausalLM needs a modeling
// module besides, which the user adds (prune's ExtraFiles); prune names it
// in auto_map only when the child contains it.
package remotecode

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

//go:embed decilm/*.py
var decilm embed.FS

// DeciLMAutoConfig is the auto_map.AutoConfig reference to the embedded
// configuration class ("module.Class", the module a file in the checkpoint
// directory).
const DeciLMAutoConfig = "configuration_decilm.DeciLMConfig"

// DeciLMModeling is the file name of a DeciLM modeling module and
// DeciLMAutoModel the auto_map.AutoModelForCausalLM reference to its class;
// autocompress does not ship one.
const (
	DeciLMModeling  = "modeling_decilm.py"
	DeciLMAutoModel = "modeling_decilm.DeciLMForCausalLM"
)

// DeciLMFiles returns the names of the embedded DeciLM module files, sorted.
func DeciLMFiles() []string {
	ents, err := decilm.ReadDir("decilm")
	if err != nil {
		panic(err) // cannot happen: the directory is embedded
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// DeciLMFile returns the content of one embedded DeciLM module file.
func DeciLMFile(name string) ([]byte, error) {
	b, err := decilm.ReadFile("decilm/" + name)
	if err != nil {
		return nil, fmt.Errorf("remotecode: no embedded DeciLM file %q (have %v)", name, DeciLMFiles())
	}
	return b, nil
}

// WriteDeciLM writes the DeciLM configuration module files into dir,
// replacing files of the same names.
func WriteDeciLM(dir string) error {
	for _, name := range DeciLMFiles() {
		b, err := DeciLMFile(name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil { //output:inside
			return fmt.Errorf("remotecode: writing the DeciLM configuration module: %w", err)
		}
	}
	return nil
}
