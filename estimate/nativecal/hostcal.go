package nativecal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/autocompress/autocompress/engine/blas"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/internal/output"
)

// OfflineEnv names the environment variable that, set to a non-empty
// value, keeps the commands from probing a host that has no native
// calibration: they use the committed coefficients and warn that the
// estimate comes from another host.
const OfflineEnv = "AUTOCOMPRESS_NO_PROBE"

// ThisHost is this machine's fingerprint: hardware.ThisHost with the BLAS
// backend the native engine runs on.
func ThisHost() hardware.Host {
	h := hardware.ThisHost()
	h.Backend = blas.Backend()
	return h
}

// The kinds of HostCalibration.
const (
	// KindCommitted: the committed coefficients, fitted on this host.
	KindCommitted = "committed"
	// KindLocal: a calibration calibrate-native wrote to the local override
	// path (estimate.NativeCoeffsPath).
	KindLocal = "local"
	// KindCached: this host's quick probe, cached earlier.
	KindCached = "cached probe"
	// KindProbed: this host's quick probe, run now and cached.
	KindProbed = "probed now"
	// KindOtherHost: the committed coefficients on a host they were not
	// fitted on, because no probe could run.
	KindOtherHost = "other host"
)

// HostCalibration is the native calibration a command uses on this host,
// and why: which coefficients, where and when they were measured, and a
// plain warning when they are not this host's.
type HostCalibration struct {
	File *estimate.NativeCoeffFile
	// Source names the coefficients as the estimates' family does
	// ("embedded", or a file's path).
	Source string
	Kind   string
	// Host is this host; MeasuredOn the host the coefficients record, and
	// Measured when.
	Host       hardware.Host
	MeasuredOn *hardware.Host
	Measured   string
	// Warning is non-empty when the estimates will not be this host's.
	Warning string
}

// Use makes the calibration the one every later native estimate in this
// process uses (estimate.UseNativeCoeffs) and returns the restore function.
func (c *HostCalibration) Use() (restore func()) { return estimate.UseNativeCoeffs(c.File, c.Source) }

// String is the calibration in one line, for the commands' output.
func (c *HostCalibration) String() string {
	at := c.Measured
	if at == "" {
		at = "at a time not recorded"
	} else {
		at = "measured " + at
	}
	where := "a host not recorded"
	if c.MeasuredOn != nil {
		where = c.MeasuredOn.String()
	}
	var s string
	switch c.Kind {
	case KindCommitted:
		s = fmt.Sprintf("native calibration: the committed coefficients, fitted on this host (%s), %s", where, at)
	case KindLocal:
		s = fmt.Sprintf("native calibration: the local calibration %s (%s), %s", c.Source, where, at)
	case KindCached, KindProbed:
		verb := "cached"
		if c.Kind == KindProbed {
			verb = "run now and cached"
		}
		s = fmt.Sprintf("native calibration: this host's quick probe (%s), %s, %s in %s", where, at, verb, c.Source)
	default:
		s = fmt.Sprintf("native calibration: the committed coefficients, fitted on another host (%s), %s", where, at)
	}
	if c.Warning != "" {
		s += "\nwarning: " + c.Warning
	}
	return s
}

// ResolveOptions say how Resolve may find this host's calibration.
type ResolveOptions struct {
	// Host is this host's fingerprint (ThisHost).
	Host hardware.Host
	// Probe measures this host and returns its coefficients (QuickProbe, or
	// a stand-in in tests); nil: no probe can run.
	Probe func(ctx context.Context) (estimate.NativeCoeffs, error)
	// Offline forbids the probe (the --offline choice, or OfflineEnv).
	Offline bool
	// CacheDir is the per-host cache (estimate.NativeCacheDir when "").
	CacheDir string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// File is the coefficient file lookup (estimate.FileNativeCoeffs when
	// nil; a stand-in in tests).
	File func() (*estimate.NativeCoeffFile, string, error)
}

// EnsureDefaults fills the coefficient-file lookup and the clock.
func (o *ResolveOptions) EnsureDefaults() {
	if o.File == nil {
		o.File = estimate.FileNativeCoeffs
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports options Resolve cannot work with: a host fingerprint
// with nothing recorded (the cache would be keyed on nothing) or a
// negative CPU count.
func (o *ResolveOptions) Validate() error {
	if o.Host.Zero() {
		return fmt.Errorf("nativecal: the host fingerprint records nothing: fill it with ThisHost")
	}
	if o.Host.CPUs < 0 {
		return fmt.Errorf("nativecal: negative CPU count %d in the host fingerprint", o.Host.CPUs)
	}
	return nil
}

// Resolve finds the native calibration for this host, in order: a local
// calibration (calibrate-native's output at estimate.NativeCoeffsPath); the
// committed coefficients when the host they record is this one; this
// host's cached quick probe (CacheDir/<fingerprint key>.json); a quick
// probe run now, cached atomically; and, when no probe may run, the
// committed coefficients with a warning that the estimate comes from
// another host. It does not make the choice active (HostCalibration.Use).
func Resolve(ctx context.Context, o ResolveOptions) (*HostCalibration, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	file, src, err := o.File()
	if err != nil {
		return nil, err
	}
	co, _ := file.Machine(Machine)
	cal := &HostCalibration{File: file, Source: src, Host: o.Host, MeasuredOn: co.Host, Measured: co.Measured}
	match, why := hardware.UncertainHost, "the coefficients do not record their host"
	if co.Host != nil {
		match, why = co.Host.Compare(o.Host)
	}
	if src != "embedded" {
		cal.Kind = KindLocal
		if match == hardware.OtherHost {
			cal.Warning = fmt.Sprintf("the local calibration %s was measured on another host: %s; rerun autocompress calibrate-native here", src, why)
		}
		return cal, nil
	}
	if match == hardware.SameHost {
		cal.Kind = KindCommitted
		return cal, nil
	}
	dir := o.CacheDir
	if dir == "" {
		dir, _ = estimate.NativeCacheDir() // none: nowhere to cache a probe
	}
	path := ""
	if dir != "" {
		path = filepath.Join(dir, o.Host.Key()+".json")
		if c, ok := readCached(path, o.Host); ok {
			return c, nil
		}
	}
	if o.Offline || o.Probe == nil || path == "" {
		cal.Kind = KindOtherHost
		reason := "probing is turned off"
		switch {
		case o.Offline:
		case path == "":
			reason = "there is no user configuration directory to keep a probe in"
		default:
			reason = "no probe can run here"
		}
		cal.Warning = fmt.Sprintf("this host has no native calibration and %s: the estimate comes from another host's coefficients (%s), and can be several times off here; run without $%s (or the offline choice) to probe this host (under a minute), or autocompress calibrate-native for the thorough fit", reason, why, OfflineEnv)
		return cal, nil
	}
	now := o.Now
	start := now().UTC()
	pc, err := o.Probe(ctx)
	if err != nil {
		return nil, fmt.Errorf("probing this host for the native calibration (set $%s to skip it and use another host's coefficients): %w", OfflineEnv, err)
	}
	h := o.Host
	pc.Host = &h
	pc.Measured = start.Format("2006-01-02 15:04 UTC")
	pc.Source = "quick probe (estimate/nativecal.QuickProbe)"
	pc.Rule = estimate.NativeRule
	f := &estimate.NativeCoeffFile{
		Comment:  "This host's quick native calibration: the committed coefficients with their compute, weight-streaming and overhead groups scaled by a probe of this host (estimate/nativecal.QuickProbe). Delete the file to probe again; autocompress calibrate-native makes the thorough fit.",
		Command:  "written by the first native estimate on this host",
		Host:     hostname(),
		Measured: pc.Measured,
		Machines: map[string]estimate.NativeCoeffs{Machine: pc},
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("nativecal: %w", err)
	}
	parsed, err := estimate.ParseNativeCoeffs(data)
	if err != nil {
		return nil, fmt.Errorf("the quick probe's coefficients: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("native calibration cache: %w", err)
	}
	if err := output.WriteFile(path, append(data, '\n'), true); err != nil {
		return nil, fmt.Errorf("native calibration cache: %w", err)
	}
	return &HostCalibration{File: parsed, Source: path, Kind: KindProbed, Host: o.Host, MeasuredOn: &h, Measured: pc.Measured}, nil
}

// readCached reads this host's cached probe at path: ok only when it
// parses, records this host and was fitted for this estimator's native
// rule (estimate.NativeRule).
func readCached(path string, host hardware.Host) (*HostCalibration, bool) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return nil, false
	}
	f, err := estimate.ParseNativeCoeffs(b)
	if err != nil {
		return nil, false
	}
	co, ok := f.Machines[Machine]
	if !ok || co.Host == nil || co.Rule != estimate.NativeRule {
		return nil, false // not this host's, or fitted for another rule
	}
	if m, _ := co.Host.Compare(host); m != hardware.SameHost {
		return nil, false
	}
	return &HostCalibration{File: f, Source: path, Kind: KindCached, Host: host, MeasuredOn: co.Host, Measured: co.Measured}, true
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}
