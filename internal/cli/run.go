package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/pipeline"
)

func init() {
	Register(&Command{
		Name:  "run",
		Usage: "[--config pipeline.yaml] [--print-config] [--dir DIR] [--force] [--until STAGE] [--offline] [any config field as a flag] [--json]",
		Short: "the whole pipeline: importance → search → prune → distill → eval → validate → measure → report",
		Long: `Runs every stage of a compression in one run directory (--dir) and writes its
report (report.html, self-contained, and report.md) in the report stage's
directory.

The configuration is YAML (--config; autocompress run --print-config writes
the commented default, every field with its flag); each field is also a flag,
which overrides the file. Unknown fields and values of the wrong type are
errors naming the file and line.

Each stage keeps its output under DIR/NN-stage with a manifest of what it
was run from (its settings, the content hash of every file it read, and the
output hash of every stage it depends on). A rerun reuses every stage whose
manifest still matches and whose outputs are intact, and says which it
reused and why the others ran: after an interrupt the run resumes (the
distillation from its last checkpoint), and a changed budget reruns search
and what follows, or only what its new plan changes. --force reruns all.

Ctrl-C or SIGTERM stops the run within seconds (exit 130) with nothing
half-written. The measure stage runs only where the target is this machine
(--gpu cpu-local --engine native); bench-serve runs as its own process, so
the peak memory it reports is the child's.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			return runFlags(fs, pipeline.DefaultConfig(), false)
		},
	})
	Register(&Command{
		Name:  "demo",
		Usage: "[--dir DIR] [--force] [any run flag]",
		Short: "compress the embedded parent for this machine's CPU and write the report (the quick start)",
		Long: `Runs the whole pipeline (autocompress run) on the embedded parent model and its
embedded text for a small deployment on this machine's CPU with the native
engine, and prints where the report is. The defaults are DemoConfig's:
autocompress demo --print-config shows them; every run flag overrides one.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			return runFlags(fs, pipeline.DemoConfig(), true)
		},
	})
}

// runJSON is run --json.
type runJSON struct {
	Result *pipeline.Result `json:"result"`
	Report string           `json:"report"`
}

func runFlags(fs *flag.FlagSet, def pipeline.Config, demo bool) func(context.Context, *Env, []string) error {
	configPath := fs.String("config", "", "YAML run configuration (default: the built-in one; --print-config writes it)")
	printConfig := fs.Bool("print-config", false, "write the commented configuration (defaults and the flags given) and exit")
	force := fs.Bool("force", false, "rerun every stage, even those whose inputs are unchanged")
	until := fs.String("until", "", "stop after this `stage`")
	jsonOut := fs.Bool("json", false, "print the stages' outcome as JSON")
	offline := fs.Bool(offlineFlag, false, offlineHelp)
	scratch := def
	apply := pipeline.BindFlags(fs, &scratch)
	return func(ctx context.Context, env *Env, args []string) error {
		if len(args) > 0 {
			return Usagef("unexpected arguments %q (every setting is a --flag or a --config field)", args)
		}
		c := def
		if *configPath != "" {
			var err error
			if c, err = pipeline.LoadConfig(*configPath); err != nil {
				var ce *pipeline.ConfigError
				if errors.As(err, &ce) {
					return Usagef("%v", err)
				}
				return err
			}
		}
		if err := apply(&c); err != nil {
			return Usagef("%v", err)
		}
		if *printConfig {
			return pipeline.PrintConfig(env.Stdout, c)
		}
		self, err := measureBinary()
		if err != nil {
			return err
		}
		st, err := pipeline.Stages(c, self)
		if err != nil {
			var ce *pipeline.ConfigError
			if errors.As(err, &ce) {
				return Usagef("%v", err)
			}
			return err
		}
		// The search prices the native engine on this CPU with this host's
		// calibration: found (or probed) before the first stage, and the
		// stages built again on it (the search stage's inputs name it).
		if eng, err := estimate.LookupEngine(c.Deployment.Engine); err == nil {
			if hw, err := hardware.Default().Lookup(c.Deployment.GPU); err == nil {
				if err := useHostCalibration(ctx, env, eng, hw, *offline); err != nil {
					return err
				}
				if st, err = pipeline.Stages(c, self); err != nil {
					return err
				}
			}
		}
		term := progress.NewTerminal(env.Stderr)
		start := time.Now()
		res, err := pipeline.Run(ctx, c.Dir, st, pipeline.Options{Progress: term.Report, Force: *force, Until: *until})
		term.End()
		var ue *pipeline.UntilError
		if errors.As(err, &ue) {
			return Usagef("--until %q: not a stage of this run (%s)", ue.Until, strings.Join(ue.Stages, ", "))
		}
		if errors.As(err, new(*pipeline.ForeignDirError)) {
			return Usagef("--dir: %s (--force reruns the stages of a run directory; it does not take over another folder)", strings.TrimPrefix(err.Error(), "pipeline: "))
		}
		if err != nil {
			return err
		}
		path, _ := pipeline.ReportPath(res)
		if *jsonOut {
			return writeJSON(env.Stdout, runJSON{Result: res, Report: path})
		}
		reused := res.Reused()
		fmt.Fprintf(env.Stdout, "%d stages in %s", len(res.Stages), time.Since(start).Round(time.Second))
		if len(reused) > 0 {
			fmt.Fprintf(env.Stdout, " (reused: %s)", strings.Join(reused, ", "))
		}
		fmt.Fprintln(env.Stdout)
		if path != "" {
			fmt.Fprintf(env.Stdout, "report: %s\n", path)
			if demo {
				fmt.Fprintf(env.Stdout, "summary: %s\n", strings.TrimSuffix(path, pipeline.ReportHTML)+pipeline.ReportMarkdown)
			}
		}
		return nil
	}
}

// measureBinary is the binary the measure stage runs bench-serve with:
// this one, whatever it is named, or "" (measure in this process) when
// this is a Go test binary, which has no bench-serve command.
func measureBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this binary to run bench-serve: %w", err)
	}
	if isTestBinary(self) {
		return "", nil
	}
	return self, nil
}

// isTestBinary reports whether path names a binary built by go test
// (name.test, name.test.exe).
func isTestBinary(path string) bool {
	b := strings.TrimSuffix(baseName(path), ".exe")
	return strings.HasSuffix(b, ".test")
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}
