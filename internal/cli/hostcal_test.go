package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/estimate/nativecal"
	"github.com/autocompress/autocompress/hardware"
)

// TestMain keeps every command of the tests from looking for (or probing)
// this host's native calibration: they price with the coefficient file,
// as before, unless a test puts a stand-in in place (TestHostCalibration).
func TestMain(m *testing.M) {
	hostCalibration = func(context.Context, *Env, bool) (*nativecal.HostCalibration, error) { return nil, nil }
	os.Exit(m.Run())
}

// TestHostCalibration: estimate on a host with no calibration probes it
// once (a stand-in probe), caches the result, says which calibration it
// used and where and when it was measured, and prices with it (the
// estimate names the cache file); the next estimate reads the cache
// without probing; --offline on another host never probes and warns that
// the estimate comes from another host. A GPU target looks for nothing.
func TestHostCalibration(t *testing.T) {
	dir := t.TempDir()
	here := hardware.Host{CPU: "Stand-in CPU", CPUs: 2, LLCBytes: 480 << 20, Backend: "go"}
	probes := 0
	old := hostCalibration
	hostCalibration = func(ctx context.Context, env *Env, offline bool) (*nativecal.HostCalibration, error) {
		return nativecal.Resolve(ctx, nativecal.ResolveOptions{Host: here, CacheDir: dir, Offline: offline,
			Probe: func(context.Context) (estimate.NativeCoeffs, error) {
				probes++
				co := estimate.DefaultNativeCoeffs().Machines[nativecal.Machine]
				co.SgemmFLOPS *= 3
				return co, nil
			}})
	}
	t.Cleanup(func() {
		hostCalibration = old
		estimate.UseNativeCoeffs(nil, "")
	})
	standInHost(t, here)
	args := []string{"estimate", "--engine", "native", "--gpu", "cpu-local", "--model", "parent", "--isl", "128", "--osl", "64", "--concurrency", "4"}
	cache := filepath.Join(dir, here.Key()+".json")
	code, out, errOut := genRunCLI(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if probes != 1 || !strings.Contains(errOut, "this host's quick probe") || !strings.Contains(errOut, "run now and cached in "+cache) {
		t.Errorf("first estimate: %d probes, stderr %q", probes, errOut)
	}
	if !strings.Contains(out, "native@"+cache) {
		t.Errorf("the estimate does not name the probed coefficients:\n%s", out)
	}
	if _, err := os.Stat(cache); err != nil {
		t.Errorf("no cache: %v", err)
	}
	code, _, errOut = genRunCLI(args...)
	if code != 0 || probes != 1 || !strings.Contains(errOut, "cached in "+cache) || strings.Contains(errOut, "run now") {
		t.Errorf("second estimate: exit %d, %d probes, stderr %q", code, probes, errOut)
	}

	estimate.UseNativeCoeffs(nil, "")
	standInHost(t, hardware.Host{CPU: "Another CPU", CPUs: 4, LLCBytes: 8 << 20})
	here = hardware.Host{CPU: "Another CPU", CPUs: 4, LLCBytes: 8 << 20}
	code, out, errOut = genRunCLI(append(args, "--offline")...)
	if code != 0 || probes != 1 {
		t.Fatalf("--offline: exit %d, %d probes: %s", code, probes, errOut)
	}
	if !strings.Contains(errOut, "warning: this host has no native calibration and probing is turned off: the estimate comes from another host") {
		t.Errorf("--offline stderr %q", errOut)
	}
	if !strings.Contains(out, "native@embedded") {
		t.Errorf("--offline does not price with the committed coefficients:\n%s", out)
	}
	code, _, errOut = genRunCLI("estimate", "--engine", "vllm", "--gpu", "h100", "--model", "parent", "--isl", "128", "--osl", "64")
	if code != 0 || strings.Contains(errOut, "native calibration") || probes != 1 {
		t.Errorf("a GPU estimate: exit %d, %d probes, stderr %q", code, probes, errOut)
	}
}
