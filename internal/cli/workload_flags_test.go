package cli

import (
	"errors"
	"flag"
	"io"
	"math"
	"strings"
	"testing"
)

func TestWorkloadFlags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		defaults workloadFlags
		args     []string
		isl, osl int // fixed lengths wanted (0: a preset)
		preset   string
		conc     int
		rate     float64
		requests int
		context  int
		err      string
	}{
		{name: "estimate default is chat", defaults: workloadFlags{DefaultPreset: "chat"}, preset: "chat", conc: 16},
		{name: "preset with concurrency", defaults: workloadFlags{DefaultPreset: "chat"}, args: []string{"--workload", "chat", "--concurrency", "3"}, preset: "chat", conc: 3},
		{name: "concurrency alone keeps the default preset", defaults: workloadFlags{DefaultPreset: "chat"}, args: []string{"--concurrency", "5"}, preset: "chat", conc: 5},
		{name: "fixed lengths", defaults: workloadFlags{DefaultPreset: "chat"}, args: []string{"--isl", "100", "--osl", "20"}, isl: 100, osl: 20, conc: 1},
		{name: "rate", defaults: workloadFlags{DefaultPreset: "chat"}, args: []string{"--isl", "100", "--osl", "20", "--rate", "2.5", "--num-requests", "50"}, isl: 100, osl: 20, rate: 2.5, requests: 50},
		{name: "offline", defaults: workloadFlags{DefaultPreset: "chat"}, args: []string{"--isl", "10", "--osl", "10", "--rate", "inf"}, isl: 10, osl: 10, rate: math.Inf(1)},
		{name: "bench-serve defaults", defaults: workloadFlags{DefaultISL: 128, DefaultOSL: 128, DefaultConcurrency: 4}, isl: 128, osl: 128, conc: 4},
		{name: "bench-serve one length", defaults: workloadFlags{DefaultISL: 128, DefaultOSL: 128, DefaultConcurrency: 4}, args: []string{"--isl", "64", "--context", "512"}, isl: 64, osl: 128, conc: 4, context: 512},
		{name: "one length without a default", defaults: workloadFlags{DefaultPreset: "chat"}, args: []string{"--isl", "100"}, err: "--isl and --osl are both needed"},
		{name: "preset and lengths", defaults: workloadFlags{DefaultPreset: "chat"}, args: []string{"--workload", "chat", "--isl", "5"}, err: "not both"},
		{name: "unknown preset", args: []string{"--workload", "nope"}, err: "--workload"},
		{name: "zero isl", args: []string{"--isl", "0", "--osl", "1"}, err: "-isl"},
		{name: "negative concurrency", args: []string{"--isl", "1", "--osl", "1", "--concurrency", "-3"}, err: "-concurrency"},
		{name: "negative requests", args: []string{"--isl", "1", "--osl", "1", "--num-requests", "-1"}, err: "-num-requests"},
		{name: "negative context", args: []string{"--isl", "1", "--osl", "1", "--context", "-1"}, err: "-context"},
		{name: "bad rate", args: []string{"--isl", "1", "--osl", "1", "--rate", "fast"}, err: "--rate"},
		{name: "over the context", args: []string{"--isl", "100", "--osl", "100", "--context", "150"}, err: "exceeds the context limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.defaults
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.Register(fs)
			if err := fs.Parse(tc.args); err != nil {
				// A value out of a flag's range is refused when parsed,
				// naming the flag (the usage error of every command).
				if tc.err == "" || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parse: %v, want an error naming %q", err, tc.err)
				}
				return
			}
			w, err := f.Workload()
			if tc.err != "" {
				var ue *UsageError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ue) {
					t.Fatalf("err %v, want a usage error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.preset != "" && w.Name != tc.preset {
				t.Errorf("workload %q, want preset %q", w.Name, tc.preset)
			}
			if tc.isl > 0 && (w.Input.MaxValue() != tc.isl || w.Output.MaxValue() != tc.osl) {
				t.Errorf("lengths %d/%d, want %d/%d", w.Input.MaxValue(), w.Output.MaxValue(), tc.isl, tc.osl)
			}
			if tc.conc > 0 && w.Concurrency != tc.conc || tc.rate != 0 && w.Rate != tc.rate {
				t.Errorf("concurrency %d rate %v, want %d %v", w.Concurrency, w.Rate, tc.conc, tc.rate)
			}
			if tc.requests > 0 && w.NumRequests != tc.requests || tc.context > 0 && w.ContextLimit != tc.context {
				t.Errorf("requests %d context %d, want %d %d", w.NumRequests, w.ContextLimit, tc.requests, tc.context)
			}
		})
	}
}

// estimate and bench-serve take the same workload flags.
func TestWorkloadFlagsShared(t *testing.T) {
	var ref workloadFlags
	refFS := flag.NewFlagSet("ref", flag.ContinueOnError)
	ref.Register(refFS)
	for _, name := range []string{"estimate", "bench-serve"} {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		commands[name].Flags(fs)
		refFS.VisitAll(func(f *flag.Flag) {
			if fs.Lookup(f.Name) == nil {
				t.Errorf("%s lacks the workload flag --%s", name, f.Name)
			}
		})
	}
}
