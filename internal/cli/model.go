package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/autocompress/autocompress/parent"
)

// ParentModel is the --model value that names the embedded parent checkpoint.
const ParentModel = "parent"

// checkpointDir resolves a --model value to a checkpoint directory: an
// existing directory holding config.json, or "parent" for the embedded parent
// model (unless ./parent is itself a checkpoint directory, which wins).
func checkpointDir(model string) (string, error) {
	if model == "" {
		return "", Usagef("--model is required (a checkpoint directory, or %q for the embedded parent)", ParentModel)
	}
	if model == ParentModel {
		if _, err := os.Stat(filepath.Join(model, "config.json")); err != nil {
			d, err := parent.Dir()
			if err != nil {
				return "", fmt.Errorf("extracting the embedded parent: %w", err)
			}
			return d, nil
		}
	}
	st, err := os.Stat(model)
	if err != nil {
		return "", Usagef("--model %s: %v (want a HuggingFace checkpoint directory with config.json and *.safetensors, or %q)", model, err, ParentModel)
	}
	if !st.IsDir() {
		return "", Usagef("--model %s is not a directory (want a HuggingFace checkpoint directory with config.json and *.safetensors, or %q)", model, ParentModel)
	}
	return model, nil
}
