package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/job"
)

// jobFlags are the flags of a command that can hand its work to a PyTorch
// engine (--engine other than native): where the job goes and how it is
// launched.
type jobFlags struct {
	engine, launch, emit, python string
	world                        int
	slurm                        job.SlurmResources
}

// engineNames is the --engine choice: native and the job engines.
func engineNames() string { return job.Native + "|" + strings.Join(job.EngineNames(), "|") }

func addJobFlags(fs *flag.FlagSet) *jobFlags {
	j := &jobFlags{}
	fs.StringVar(&j.engine, "engine", job.Native, "what runs the model: "+engineNames()+" (all but native write a PyTorch job directory, see --emit)")
	fs.StringVar(&j.launch, "launch", job.LaunchPrint, "with a PyTorch --engine: print (the commands), local (run it here, streaming progress; Ctrl-C checkpoints it, a rerun resumes) or slurm (sbatch)")
	fs.StringVar(&j.emit, "emit", "", "with a PyTorch --engine: the job `directory` to write (default OUT.job)")
	fs.StringVar(&j.python, "python", "", "with --launch local: the Python interpreter (default /usr/bin/python3 where it exists, else python3)")
	intVar(fs, &j.world, "world-size", 1, 1, 65536, "with a PyTorch --engine: ranks (GPUs) the job runs on; the batch must be a multiple")
	intVar(fs, &j.slurm.Nodes, "slurm-nodes", 1, 1, 4096, "with a PyTorch --engine: nodes launch.sbatch asks for")
	fs.StringVar(&j.slurm.Partition, "slurm-partition", "", "with a PyTorch --engine: Slurm partition of launch.sbatch")
	fs.StringVar(&j.slurm.Account, "slurm-account", "", "with a PyTorch --engine: Slurm account of launch.sbatch")
	fs.StringVar(&j.slurm.Time, "slurm-time", "04:00:00", "with a PyTorch --engine: Slurm time limit of launch.sbatch")
	return j
}

// native reports whether the command runs in this binary.
func (j *jobFlags) native() bool { return job.IsNative(j.engine) }

// check is the usage error of a bad --engine or --launch; defaultDir is
// the job directory when --emit is not given ("" when there is none).
func (j *jobFlags) check(defaultDir string) error {
	if j.native() {
		return nil
	}
	if _, ok := job.LookupEngine(j.engine); !ok {
		return Usagef("--engine %q: want %s", j.engine, engineNames())
	}
	ok := false
	for _, m := range job.LaunchModes {
		ok = ok || j.launch == m
	}
	if !ok {
		return Usagef("--launch %q: want %s", j.launch, strings.Join(job.LaunchModes, "|"))
	}
	if j.emit == "" {
		if defaultDir == "" {
			return Usagef("--engine %s needs --emit DIR, the job directory to write", j.engine)
		}
		j.emit = defaultDir
	}
	if j.slurm.Nodes > j.world || j.world%j.slurm.Nodes != 0 {
		return Usagef("--world-size %d does not divide among --slurm-nodes %d", j.world, j.slurm.Nodes)
	}
	return nil
}

// run hands the work to the job engine: emit, launch and (local) ingest,
// then says what happened. out and force place a local job's output.
func (j *jobFlags) run(ctx context.Context, env *Env, ec job.EmitConfig, out string, force, asJSON bool) (*job.RunResult, error) {
	ec.Engine, ec.Dir, ec.WorldSize, ec.Slurm = j.engine, j.emit, j.world, j.slurm
	term := progress.NewTerminal(env.Stderr)
	ec.Progress = term.Report
	rc := job.RunConfig{Emit: ec, Launch: job.LaunchConfig{Mode: j.launch, Python: j.python, Output: env.Stderr}, Out: out, Force: force}
	res, err := job.Run(ctx, rc)
	term.End()
	var me *job.ModuleError
	switch {
	case errors.As(err, &me):
		return nil, fmt.Errorf("%w; --python chooses the interpreter, --launch print writes the job without running it", err)
	case err != nil && ctx.Err() != nil && res != nil && res.Launched != nil:
		fmt.Fprintf(env.Stderr, "the job checkpointed in %s; run the same command again to resume it\n", j.emit)
		return nil, err
	case err != nil:
		return nil, err
	}
	if asJSON {
		return res, writeJSON(env.Stdout, res)
	}
	l := res.Launched
	switch l.Mode {
	case job.LaunchPrint:
		fmt.Fprintf(env.Stdout, "wrote the %s job for %s to %s; run it with one of:\n", ec.Kind, j.engine, j.emit)
		for _, c := range l.Commands {
			fmt.Fprintf(env.Stdout, "  %s\n", c)
		}
	case job.LaunchSlurm:
		fmt.Fprintf(env.Stdout, "submitted Slurm job %s for %s; follow it with: autocompress job wait %s\n", l.JobID, j.emit, j.emit)
	}
	return res, nil
}
