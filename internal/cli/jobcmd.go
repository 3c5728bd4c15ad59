package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/job"
)

func init() {
	Register(&Command{
		Name:  "job",
		Usage: "status|wait DIR [flags]",
		Short: "follow a PyTorch job directory (written by --engine torch|automodel|megatron-bridge)",
		Long: `status reads the job's progress.jsonl, slurm.json and result.json and says
where it stands; wait does so until the job has a result, showing its steps
(Ctrl-C stops the waiting, not the job). Both exit 1 when the job failed.
The job directory's files are described in job/CONTRACT.md.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			jsonOut := fs.Bool("json", false, "print the status as JSON")
			poll := floatArg(fs, "poll", 2, positive, "wait: seconds between two reads of the job's files")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 1 { // flags may follow the verb: job status --json DIR
					if err := fs.Parse(args[1:]); err != nil {
						return Usagef("%v", err)
					}
					args = append(args[:1:1], fs.Args()...)
				}
				if len(args) != 2 || (args[0] != "status" && args[0] != "wait") {
					return Usagef("want: autocompress job status|wait DIR")
				}
				var s *job.Status
				var err error
				if args[0] == "status" {
					s, err = job.ReadStatus(args[1])
				} else {
					term := progress.NewTerminal(env.Stderr)
					s, err = job.Wait(ctx, args[1], time.Duration(*poll*float64(time.Second)), term.Report)
					term.End()
				}
				if err != nil {
					return err
				}
				if *jsonOut {
					if err := writeJSON(env.Stdout, s); err != nil {
						return err
					}
				} else {
					jobStatusPrint(env.Stdout, s)
				}
				if s.State == job.StatusFailed {
					return &ExitError{Code: 1}
				}
				return nil
			}
		},
	})
}

func jobStatusPrint(w io.Writer, s *job.Status) {
	fmt.Fprintf(w, "%s: %s job, engine %s: %s", s.Dir, s.Kind, s.Engine, s.State)
	if s.SlurmJob != "" {
		fmt.Fprintf(w, " (Slurm job %s)", s.SlurmJob)
	}
	if s.Steps > 0 {
		fmt.Fprintf(w, ", step %d of %d", s.Step, s.Steps)
	}
	if s.Loss != 0 {
		fmt.Fprintf(w, ", loss %.4f", s.Loss)
	}
	if s.TokensPerS > 0 {
		fmt.Fprintf(w, ", %.0f tok/s", s.TokensPerS)
	}
	fmt.Fprintln(w)
	if r := s.Result; r != nil {
		if r.Error != "" {
			fmt.Fprintf(w, "error: %s\n", r.Error)
		}
		if r.Perplexity != nil {
			fmt.Fprintf(w, "perplexity %.3f\n", *r.Perplexity)
		}
		if r.Checkpoint != "" {
			fmt.Fprintf(w, "checkpoint %s\n", r.Checkpoint)
		}
	}
}
