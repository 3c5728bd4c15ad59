package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
)

// standInHost makes the commands see h as the machine they run on.
func standInHost(t *testing.T, h hardware.Host) {
	t.Helper()
	old := thisHost
	thisHost = func() hardware.Host { return h }
	t.Cleanup(func() { thisHost = old })
}

// TestErrorBandNamesItsHost (issue 17, class 2): the native estimate's
// error band names the host and window its rows were measured on, and on
// a host that is not that one the text and --json say the band does not
// apply here and how to calibrate this host. validate-native says whose
// rows its "ok" is about. The host is a stand-in, not this machine.
func TestErrorBandNamesItsHost(t *testing.T) {
	rec := estimate.DefaultNativeCoeffs().Machines["cpu-local"].Host
	if rec == nil || rec.LLCBytes == 0 {
		t.Fatal("the embedded native coefficients record no host")
	}
	args := []string{"estimate", "--engine", "native", "--gpu", "cpu-local", "--model", "parent", "--isl", "128", "--osl", "64", "--concurrency", "4"}
	other := hardware.Host{CPU: "Intel(R) Xeon(R) Platinum 8480+", CPUs: 2, LLCBytes: 105 << 20}
	// (A host the record cannot tell apart, rows without a CPU model, is
	// nativecal's TestErrorBandNamesItsHost: the committed rows record it.)
	for _, tc := range []struct {
		name    string
		host    hardware.Host
		applies hardware.HostMatch
		text    []string
		vnative []string
	}{
		{"another host", other, hardware.OtherHost,
			[]string{"measured on the calibration's host (AMD EPYC, 2 CPUs, 32 MiB last-level cache), 2026-12-03 11:50–12:00 UTC",
				"is not the calibration's host: the band does not apply here", "last-level cache 105 MiB, recorded 32 MiB", "autocompress calibrate-native"},
			[]string{"Rows measured on vm (", "another host's rows", "nothing about this host", "calibrate it: autocompress calibrate-native"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			standInHost(t, tc.host)
			code, out, errOut := genRunCLI(args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.text {
				if !strings.Contains(out, w) {
					t.Errorf("estimate lacks %q:\n%s", w, out)
				}
			}
			code, out, errOut = genRunCLI(append(args, "--json")...)
			var js struct {
				Band estimate.Band `json:"error_band"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &js) != nil {
				t.Fatalf("--json: exit %d: %s %s", code, out, errOut)
			}
			b := js.Band
			if b.Applies != tc.applies || b.Host == nil || *b.Host != *rec || b.ThisHost == nil || *b.ThisHost != tc.host ||
				!strings.HasPrefix(b.Measured, "2026-12-03 11:50") || b.Why == "" {
				t.Errorf("--json error_band %+v: want applies %q, the recorded host, this host %+v and the window", b, tc.applies, tc.host)
			}
			code, out, errOut = genRunCLI("validate-native")
			if code != 0 {
				t.Fatalf("validate-native: exit %d: %s", code, errOut)
			}
			for _, w := range tc.vnative {
				if !strings.Contains(out, w) {
					t.Errorf("validate-native lacks %q:\n%s", w, out[:min(len(out), 1500)])
				}
			}
			code, out, _ = genRunCLI("validate-native", "--json")
			var rep struct {
				Here struct{ Applies hardware.HostMatch }
			}
			if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Here.Applies != tc.applies {
				t.Errorf("validate-native --json: exit %d, applies %q, want %q", code, rep.Here.Applies, tc.applies)
			}
		})
	}
}

// TestGPUErrorBandNamesItsGPUs (issue 17, class 2): a GPU family's error
// band names the GPUs its fitted rows were measured on and when, and on a
// GPU none of them was measured on says the band does not apply there;
// validate-estimator lists where and when each family's rows were measured.
func TestGPUErrorBandNamesItsGPUs(t *testing.T) {
	dir := t.TempDir()
	user := writeUserMeasurements(t, dir) // vllm rows on h100-sxm and h200, undated
	coeffs := filepath.Join(dir, "coeffs.json")
	if code, _, errs := estRunCLI(t, "calibrate", "--user-only", "--user", user, "--iter", "30", "--out", coeffs); code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, errs)
	}
	args := []string{"estimate", "--coeffs", coeffs, "--engine", "vllm", "--isl", "1024", "--osl", "256", "--concurrency", "4"}
	for _, tc := range []struct {
		gpu     string
		applies hardware.HostMatch
		want    string
	}{
		{"h200", hardware.SameHost, "measured on h100-sxm, h200, at a time not recorded"},
		{"a100-80gb", hardware.OtherHost, "the band does not apply here: no fitted row was measured on a100-80gb"},
	} {
		code, out, errs := estRunCLI(t, append(args, "--gpu", tc.gpu)...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("--gpu %s: exit %d, want %q:\n%s%s", tc.gpu, code, tc.want, out, errs)
		}
		code, out, _ = estRunCLI(t, append(args, "--gpu", tc.gpu, "--json")...)
		var js struct {
			Band estimate.Band `json:"error_band"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &js) != nil || js.Band.Applies != tc.applies || js.Band.MeasuredOn != "h100-sxm, h200" {
			t.Errorf("--gpu %s --json: exit %d, error_band %+v, want applies %q on h100-sxm, h200", tc.gpu, code, js.Band, tc.applies)
		}
	}
	code, out, errs := estRunCLI(t, "validate-estimator", "--user-only", "--user", user, "--iter", "10")
	if code != 0 || !strings.Contains(out, "Where and when the rows were measured") || !regexp.MustCompile(`vllm\s+dates not recorded; h100-sxm, h200`).MatchString(out) {
		t.Errorf("validate-estimator: exit %d: %s%s", code, out, errs)
	}
}
