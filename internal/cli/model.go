package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
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

// engineCheckpoint resolves the model-valued flag name (--model, --teacher,
// --student) of a command that runs the model in the native engine, and
// refuses, from its config.json alone and before any other work, a family
// or a layer the engine cannot run.
func engineCheckpoint(name, model string) (string, error) {
	dir, err := checkpointDir(model)
	if err != nil {
		return "", err
	}
	a, err := architecture.Load(dir)
	if err != nil {
		return "", err
	}
	if err := engineRuns(name, model, a); err != nil {
		return "", err
	}
	return dir, nil
}

// engineTrains is engineRuns for a model the command trains (train,
// distill's --student): the native engine must also run its backward pass.
func engineTrains(name, model string, a *architecture.Model) error {
	if err := engineRuns(name, model, a); err != nil {
		return err
	}
	if err := engine.CheckTrain(a); err != nil {
		return Usagef("%s %s: this command trains the model: %v", name, model, err)
	}
	return nil
}

// engineTrainCheckpoint is engineCheckpoint for a model the command
// trains (engineTrains).
func engineTrainCheckpoint(name, model string) (string, error) {
	dir, err := engineCheckpoint(name, model)
	if err != nil {
		return "", err
	}
	a, err := architecture.Load(dir)
	if err != nil {
		return "", err
	}
	if err := engineTrains(name, model, a); err != nil {
		return "", err
	}
	return dir, nil
}

// engineRuns is the usage error of a model the native engine cannot run,
// naming the flag and the families it runs; nil when it runs a.
func engineRuns(name, model string, a *architecture.Model) error {
	return engineRunsFor(name, model, a, "this command runs the model", "estimate, search, prune, validate and inspect take every supported family")
}

// engineRunsFor is engineRuns with what runs the model and what the user
// can do instead.
func engineRunsFor(name, model string, a *architecture.Model, who, instead string) error {
	err := engine.Check(a)
	if err == nil {
		return nil
	}
	what := err.Error()
	var ue *engine.UnsupportedError
	if errors.As(err, &ue) {
		what = ue.Feature
		if ue.Layer >= 0 {
			what = fmt.Sprintf("layer %d: %s", ue.Layer, ue.Feature)
		}
	}
	var runs []string
	for _, f := range architecture.Families() {
		if f.Engine.Runs {
			runs = append(runs, f.Arch)
		}
	}
	return Usagef("%s %s: %s in the native engine, which cannot run %s; it runs %s (%s)",
		name, model, who, what, strings.Join(runs, ", "), instead)
}
