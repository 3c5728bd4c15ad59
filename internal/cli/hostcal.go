package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/nativecal"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/internal/progress"
)

// offlineFlag is the flag that keeps a command from probing this host.
const offlineFlag = "offline"

const offlineHelp = "never probe this host for the native engine's calibration (also $AUTOCOMPRESS_NO_PROBE): without one, the estimate uses another host's coefficients, with a warning"

// hostCalibration is how the commands that price the native engine on
// this CPU (estimate, search, run, demo) find this host's calibration;
// the tests replace it (their commands must never run the real probe).
var hostCalibration = resolveHostCalibration

// useHostCalibration makes this host's native calibration the one the
// command's estimates use, when eng is the native engine on a CPU entry
// (nothing otherwise), and says on stderr which calibration that is, where
// and when it was measured, with a plain warning when it is another
// host's. offline (or $AUTOCOMPRESS_NO_PROBE) keeps it from probing.
func useHostCalibration(ctx context.Context, env *Env, eng estimate.Engine, hw *hardware.GPU, offline bool) error {
	if !eng.Local() || hw == nil || hw.Backend != hardware.CPU {
		return nil
	}
	cal, err := hostCalibration(ctx, env, offline || os.Getenv(nativecal.OfflineEnv) != "")
	if err != nil || cal == nil {
		return err
	}
	cal.Use()
	fmt.Fprintln(env.Stderr, cal.String())
	return nil
}

// resolveHostCalibration is nativecal.Resolve on this host with the real
// quick probe: bench-serve run as this binary's own processes (so that
// the probe measures peak memory), in this process when the binary is a
// test's.
func resolveHostCalibration(ctx context.Context, env *Env, offline bool) (*nativecal.HostCalibration, error) {
	probe := func(ctx context.Context) (estimate.NativeCoeffs, error) {
		par, err := parentArch()
		if err != nil {
			return estimate.NativeCoeffs{}, err
		}
		self, err := measureBinary()
		if err != nil {
			return estimate.NativeCoeffs{}, err
		}
		run := nativecal.InProcess
		if self != "" {
			run = nativecal.Exec(self)
		}
		fmt.Fprintln(env.Stderr, "this host has no native calibration: probing it (once, under a minute; the result is cached)")
		term := progress.NewTerminal(env.Stderr)
		prior := estimate.DefaultNativeCoeffs().Machines[nativecal.Machine]
		co, p, err := nativecal.QuickProbe(ctx, par, run, prior, nil, term.Report)
		term.End()
		if err != nil {
			return co, err
		}
		s := nativecal.TransferScales(co, prior)
		fmt.Fprintf(env.Stderr, "probed in %.0f s: sgemm %.0f GFLOP/s, cache cliff %.1f MiB; the committed coefficients scaled by %.2f (compute), %.2f (weights), %.2f (packed path), %.2f (overheads)\n",
			p.Took.Seconds(), p.SgemmFLOPS/1e9, p.CacheBytes/(1<<20), s[0], s[1], s[2], s[3])
		return co, nil
	}
	return nativecal.Resolve(ctx, nativecal.ResolveOptions{Host: nativecal.ThisHost(), Probe: probe, Offline: offline})
}
