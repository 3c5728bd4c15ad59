package cli

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/nativecal"
	"github.com/autocompress/autocompress/hardware"
)

// thisHost is the identity of the machine the command runs on, which the
// native error bands are compared with; tests replace it to stand in for
// another host.
var thisHost = nativecal.ThisHost

func init() {
	Register(&Command{
		Name:  "validate-native",
		Usage: "[--rows FILE.csv] [--coeffs FILE.json] [--json]",
		Short: "report the native engine estimate's error against bench-serve rows held out from its fit",
		Long: `Validate-native prices every row of the native calibration sweep (default: the rows
committed in estimate/nativecal/sweep.csv, measured by calibrate-native) with the native
coefficients estimate uses (the local override when present, else the embedded file; or
--coeffs FILE), and prints the median and largest absolute errors of TTFT, TPOT, output
throughput and peak memory (against bench-serve's VmHWM) on the held-out rows and on the
fitted ones, the ranking of the held-out children by TPOT at isl 128, osl 64, concurrency 4
(measured and estimated, with ratios to the uniform child), every row, and the machine's
load while they were measured. Nothing is measured: it runs in a second.

The rows record the host they were measured on (CPU model, CPU count, last-level cache)
and when; the report names them and says whether this machine is that host. Every
figure is the rows' host's: the committed rows are the development machine's, so on
another machine "ok" says nothing about this one (calibrate-native measures it).`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			rowsPath := fs.String("rows", "", "measured rows (CSV from calibrate-native --rows-out); default the committed sweep")
			coeffs := fs.String("coeffs", "", "native coefficient file (default: the one estimate uses)")
			asJSON := fs.Bool("json", false, "write the report as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("unexpected arguments %q", args)
				}
				var prov nativecal.Provenance
				var rows []nativecal.Row
				var err error
				if *rowsPath != "" {
					f, err := os.Open(*rowsPath)
					if err != nil {
						return Usagef("--rows: %v", err)
					}
					prov, rows, err = nativecal.ReadSweep(f)
					f.Close()
					if err != nil {
						return fmt.Errorf("%s: %w", *rowsPath, err)
					}
				} else if prov, rows, err = nativecal.CommittedSweep(); err != nil {
					return err
				}
				var file *estimate.NativeCoeffFile
				src := *coeffs
				if src != "" {
					b, err := os.ReadFile(src)
					if err != nil {
						return Usagef("--coeffs: %v", err)
					}
					if file, err = estimate.ParseNativeCoeffs(b); err != nil {
						return err
					}
				} else if file, src, err = estimate.ActiveNativeCoeffs(); err != nil {
					return err
				}
				co, _ := file.Machine(nativecal.Machine)
				par, err := parentArch()
				if err != nil {
					return err
				}
				rep, err := nativecal.Validate(par, rows, co)
				if err != nil {
					return err
				}
				rep.Provenance = prov
				rep.CheckHost(thisHost())
				if *asJSON {
					return writeJSON(env.Stdout, rep)
				}
				fitted := "a host they do not record"
				if co.Host != nil {
					fitted = "a host (" + co.Host.String() + ")"
				}
				if co.Measured != "" {
					fitted += ", " + co.Measured
				}
				fmt.Fprintf(env.Stdout, "coefficients: %s (%s), fitted on rows of %s\n", src, co.Source, fitted)
				rep.Print(env.Stdout)
				if rep.Here.Applies != hardware.SameHost {
					fmt.Fprintf(env.Stdout, "\nTo know the error on this host, calibrate it: autocompress calibrate-native --rows-out rows.csv (about 12 minutes\n"+
						"on a quiet 2-core machine; estimate then uses its coefficients), then: autocompress validate-native --rows rows.csv\n")
				}
				return nil
			}
		},
	})
}
