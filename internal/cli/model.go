package cli

import (
	"errors"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/modelref"
)

// ParentModel is the --model value that names the embedded parent checkpoint.
const ParentModel = modelref.Parent

// resolveModel resolves a --model value by the one rule of package
// modelref; a value that names nothing is a usage error naming the flag.
func resolveModel(model string) (*modelref.Ref, error) {
	r, err := modelref.Resolve(model)
	if err != nil {
		return nil, modelUsage(err)
	}
	return r, nil
}

// modelUsage turns the resolver's "wrong value" errors into usage errors
// (exit status 2) that name --model; other errors pass through.
func modelUsage(err error) error {
	var ue *modelref.UnknownError
	var nw *modelref.NoWeightsError
	var nc *modelref.NotCheckpointError
	if errors.Is(err, modelref.ErrEmpty) {
		return Usagef("--model is required (a checkpoint directory, a config.json, %q for the embedded parent, or a preset)", ParentModel)
	}
	if errors.As(err, &ue) || errors.As(err, &nw) || errors.As(err, &nc) {
		return Usagef("--model: %v", err)
	}
	return err
}

// checkpointDir resolves a --model value to a checkpoint directory (a
// directory holding config.json and weights, or the embedded parent).
func checkpointDir(model string) (string, error) {
	r, err := resolveModel(model)
	if err != nil {
		return "", err
	}
	d, err := r.Checkpoint()
	if err != nil {
		return "", modelUsage(err)
	}
	return d, nil
}

// modelArch resolves a --model value to a model description: a preset, a
// config.json, a checkpoint directory or the embedded parent.
func modelArch(model string) (*architecture.Model, error) {
	r, err := resolveModel(model)
	if err != nil {
		return nil, err
	}
	m, err := r.Arch()
	if err != nil {
		return nil, modelUsage(err)
	}
	return m, nil
}
