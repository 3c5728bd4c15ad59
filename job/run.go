package job

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/autocompress/autocompress/internal/output"
)

// RunConfig is one job from request to result: what to emit and how to
// launch it, and where a local job's output goes once ingested.
type RunConfig struct {
	Emit   EmitConfig
	Launch LaunchConfig
	// Out receives a done local job's output: the distilled checkpoint
	// directory (distill) or the scores file (importance); "" leaves it in
	// the job directory. An existing Out is replaced only with Force.
	Out   string
	Force bool
}

// EnsureDefaults fills both parts' defaults (the launch's directory is
// the emitted job's) and returns c.
func (c *RunConfig) EnsureDefaults() *RunConfig {
	c.Emit.EnsureDefaults()
	c.Launch.Dir = c.Emit.Dir
	if c.Launch.Progress == nil {
		c.Launch.Progress = c.Emit.Progress
	}
	c.Launch.EnsureDefaults()
	return c
}

// Validate checks both parts (after EnsureDefaults).
func (c *RunConfig) Validate() error {
	if err := c.Emit.Validate(); err != nil {
		return err
	}
	if err := c.Launch.Validate(); err != nil {
		return err
	}
	if c.Out != "" && c.Emit.Kind != Distill && c.Emit.Kind != Importance {
		return fmt.Errorf("job: a %s job has no output file to place: its figures are in the result", c.Emit.Kind)
	}
	return nil
}

// RunResult is what Run did.
type RunResult struct {
	Emitted  *Emitted
	Launched *Launched
	// Ingested is set when a local job ended done (and was checked).
	Ingested *Ingested
	// Out is where the output was placed ("" when it stays in the job).
	Out string
}

// Run emits the job (Emit), launches it (Launch) and, when a local job
// ends done, ingests it (Ingest) and places its output at c.Out. For a
// local launch the interpreter's modules are checked before anything is
// written; an output at c.Out is refused before any work unless c.Force.
// Running the same request again resumes its job.
func Run(ctx context.Context, c RunConfig) (*RunResult, error) {
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Out != "" && c.Launch.Mode == LaunchLocal {
		if err := output.Check(c.Out, c.Force); err != nil {
			return nil, err
		}
	}
	if c.Launch.Mode == LaunchLocal {
		eng, _ := LookupEngine(c.Emit.Engine)
		if err := CheckModules(ctx, c.Launch.Python, eng); err != nil {
			return nil, err
		}
	}
	e, err := Emit(ctx, c.Emit)
	if err != nil {
		return nil, err
	}
	if e.Existing {
		c.Emit.Progress.Notef("job", "%s holds this job already: launching it again (it resumes)", e.Dir)
	}
	res := &RunResult{Emitted: e}
	res.Launched, err = Launch(ctx, c.Launch)
	if err != nil || c.Launch.Mode != LaunchLocal {
		return res, err
	}
	if res.Ingested, err = Ingest(e.Dir); err != nil {
		return res, err
	}
	if c.Out == "" {
		return res, nil
	}
	if err := place(res.Ingested, c.Out, c.Force); err != nil {
		return res, err
	}
	res.Out = c.Out
	return res, nil
}

// place copies the ingested output to out, atomically.
func place(in *Ingested, out string, force bool) error {
	switch {
	case in.Contract.Kind == Distill:
		d, err := output.NewDir(out, force)
		if err != nil {
			return fmt.Errorf("job: %w", err)
		}
		defer d.Abort()
		names, err := modelFiles(in.Checkpoint)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := copyFile(filepath.Join(in.Checkpoint, n), filepath.Join(d.Path(), n)); err != nil {
				return err
			}
		}
		return d.Commit()
	case in.Scores != nil:
		return in.Scores.Save(out)
	}
	return errors.New("job: nothing to place")
}
