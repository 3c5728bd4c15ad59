package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/nativecal"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/servebench"
)

func init() {
	Register(&Command{
		Name:  "calibrate-native",
		Usage: "[--quick] [--from-rows FILE.csv] [--rows-out FILE.csv] [--out FILE.json] [--force]",
		Short: "measure the native engine on this machine and fit its cost model (cpu-local)",
		Long: `Calibrate-native measures the native engine with bench-serve over a designed sweep
and fits the coefficients estimate, search and the pipeline use for --engine native on
cpu-local.

The sweep (estimate/nativecal.DesignedSweep): random-weight models built from the embedded
parent's shape, saved as bf16 checkpoints: 12 fitted shapes (parent, FFN 256, depth 4,
attention removed in 6 layers, MLP removed in 3, 4 heads, hidden 128, a wider 6-layer
model, depth 2, a tiny model, per-layer FFN, and a 68M-parameter model far past the cache)
each under four of five workloads (isl/osl/concurrency 128/64/4, 32/96/1, 256/32/2,
64/64/8, 384/16/4), and 6 held-out children (uniform FFN 384, depth 6, another per-layer
FFN, attention removed in 3 layers, all combined, a per-layer child past the cache)
under 128/64/4, 96/48/2 and 200/100/6. Each point runs "autocompress bench-serve --json" in a child
process (8 requests per client, at least 16; --repeats measured runs after warm-up runs
that repeat until TTFT and TPOT agree within 5%), so its peak RSS is that of one model;
the sgemm rate (1024³, all threads) is measured before each point.

The fit: step-time coefficients by non-negative least squares on the relative errors of
TTFT, TPOT and time per output token of the fitted rows; the memory rule (fixed cost, heap
multiplier, mapped checkpoint) by least squares on the peak RSS. The held-out report is
printed (as validate-native prints it) and its medians are stored with the coefficients.

--out defaults to the local override that estimate reads when present
($AUTOCOMPRESS_NATIVE_COEFFS, else ~/.config/autocompress/native_coefficients.json);
pass --out estimate/native_coefficients.json --rows-out estimate/nativecal/sweep.csv to
replace the embedded defaults. --from-rows refits from measured rows without measuring.
--quick runs a 4-point sweep (about a minute) to check the machinery; its fit is not a
calibration. Every output is checked before the measuring: an existing file needs --force,
and one that could not be written is refused at once.

The rows record where and when they were measured (this machine's CPU model, CPU count and
last-level cache, the hostname, the window and the load, as "# key: value" lines above the
CSV header), and the coefficient file takes them from the rows: estimate and validate-native
name that host and say when the machine they run on is not it. A refit (--from-rows) is the
same file on any machine. The full sweep takes about 12 minutes on the 2-core development machine.

Reproduce the embedded coefficients from the committed rows with:
  autocompress calibrate-native --from-rows estimate/nativecal/sweep.csv --out estimate/native_coefficients.json --force`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			quick := fs.Bool("quick", false, "a 4-point sweep that checks the machinery (not a calibration)")
			fromRows := fs.String("from-rows", "", "fit from these measured rows (CSV) instead of measuring")
			rowsOut := fs.String("rows-out", "", "write the measured rows here (CSV)")
			out := fs.String("out", "", "coefficient file to write (default: the local override path)")
			force := fs.Bool("force", false, "overwrite --out and --rows-out if they exist")
			repeats := intArg(fs, "repeats", 3, 1, maxRepeats, "measured bench-serve runs per point")
			maxWarmup := intArg(fs, "max-warmup", 3, 2, maxRepeats, "most warm-up runs per point (at least 2)")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("unexpected arguments %q", args)
				}
				if *repeats < 1 || *maxWarmup < 2 {
					return Usagef("--repeats must be ≥ 1 and --max-warmup ≥ 2, got %d and %d", *repeats, *maxWarmup)
				}
				if *fromRows != "" && (*quick || *rowsOut != "") {
					return Usagef("--from-rows fits existing rows; it does not combine with --quick or --rows-out")
				}
				dest := *out
				if dest == "" {
					p, err := estimate.NativeCoeffsPath()
					if err != nil {
						return err
					}
					dest = p
				}
				// Every output and input the end of the job needs is checked
				// before the measuring (minutes), not after it.
				for _, o := range []struct{ flag, path string }{{"--out", dest}, {"--rows-out", *rowsOut}} {
					if o.path == "" {
						continue
					}
					if err := output.Check(o.path, *force); err != nil {
						if errors.As(err, new(*output.ExistsError)) {
							return err // the one exists-error: exit 1 and the one hint, as in every command
						}
						return Usagef("%s %s: %v", o.flag, o.path, err)
					}
				}
				par, err := parentArch()
				if err != nil {
					return err
				}
				var prov nativecal.Provenance
				var rows []nativecal.Row
				if *fromRows != "" {
					f, err := os.Open(*fromRows)
					if err != nil {
						return Usagef("--from-rows: %v", err)
					}
					prov, rows, err = nativecal.ReadSweep(f)
					f.Close()
					if err != nil {
						return fmt.Errorf("%s: %w", *fromRows, err)
					}
				} else {
					exe, err := os.Executable()
					if err != nil {
						return fmt.Errorf("calibrate-native: finding this binary to run bench-serve: %w", err)
					}
					pts := nativecal.DesignedSweep()
					if *quick {
						pts = nativecal.QuickSweep()
					}
					// What the rows record of where and when they were
					// measured: this machine, now.
					host, _ := os.Hostname()
					prov = nativecal.Provenance{Hostname: host, Host: thisHost(), Start: time.Now().UTC(), Load: "1-minute load average " + loadAverage()}
					if *quick {
						prov.Note = "quick sweep (checks the machinery; not a calibration)"
					}
					fmt.Fprintf(env.Stderr, "measuring %d points on %s (load average %s)\n", len(pts), prov.Host, loadAverage())
					term := progress.NewTerminal(env.Stderr)
					rows, err = nativecal.Measure(ctx, par, pts, nativecal.Exec(exe), servebench.Options{Repeats: *repeats, MaxWarmup: *maxWarmup},
						term.Report)
					term.End()
					prov.End = time.Now().UTC()
					if err != nil && len(rows) > 0 && *rowsOut != "" {
						// Keep what was measured: the rows are the expensive part.
						var buf bytes.Buffer
						if werr := nativecal.WriteSweep(&buf, prov, rows); werr == nil && output.WriteFile(*rowsOut, buf.Bytes(), *force) == nil {
							fmt.Fprintf(env.Stderr, "wrote the %d rows measured before the error to %s\n", len(rows), *rowsOut)
						}
					}
					if err != nil {
						return err
					}
					prov.Load += " → " + loadAverage()
				}
				// One fit path: the rows as written to --rows-out, read back.
				cal, err := nativecal.Calibrate(par, prov, rows, nativecal.Threads())
				if err != nil {
					return err
				}
				if *rowsOut != "" {
					if err := output.WriteFile(*rowsOut, cal.CSV, *force); err != nil {
						return err
					}
					fmt.Fprintf(env.Stderr, "wrote %s\n", *rowsOut)
				}
				data, err := cal.File()
				if err != nil {
					return err
				}
				if err := output.WriteFile(dest, data, *force); err != nil {
					return err
				}
				cal.Report.CheckHost(thisHost())
				cal.Report.Print(env.Stdout)
				fmt.Fprintf(env.Stderr, "wrote %s\n", dest)
				return nil
			}
		},
	})
}

// parentArch returns the embedded parent's architecture.
func parentArch() (*architecture.Model, error) {
	d, err := parent.Dir()
	if err != nil {
		return nil, fmt.Errorf("extracting the embedded parent: %w", err)
	}
	return architecture.Load(d)
}

// loadAverage returns the 1-minute load average (Linux), or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
