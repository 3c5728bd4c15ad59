package cli

import (
	"flag"
	"strings"

	"github.com/autocompress/autocompress/workload"
)

// workloadFlags is the one set of workload flags, shared by every command
// that serves or prices traffic (estimate, bench-serve, search):
//
//	--workload PRESET   a named workload (lengths, arrivals, context limit)
//	--isl N --osl N     fixed input and output lengths instead of a preset
//	--concurrency N     closed-loop clients (overrides a preset's arrivals)
//	--rate R            Poisson requests per second, or inf for an offline run
//	--num-requests N    requests of a run (0: the workload's default)
//	--context N         per-request context limit, prompt + output (0: the workload's)
//	--seed N            seed of the sampled lengths, arrivals and prompts
//
// A command sets the defaults before Register: DefaultPreset is used when no
// length is given (estimate: chat); otherwise DefaultISL and DefaultOSL stand
// in for a length not given (0: both must be given) and DefaultConcurrency
// for a concurrency not given in a closed loop.
type workloadFlags struct {
	DefaultPreset          string
	DefaultISL, DefaultOSL int
	DefaultConcurrency     int

	fs                                     *flag.FlagSet
	preset, rate                           string
	isl, osl, concurrency, requests, limit int
	seed                                   uint64
}

// Register declares the workload flags on fs.
func (f *workloadFlags) Register(fs *flag.FlagSet) {
	f.fs = fs
	def := "fixed lengths"
	if f.DefaultPreset != "" {
		def = f.DefaultPreset + " when --isl/--osl are not given"
	}
	fs.StringVar(&f.preset, "workload", "", "workload `preset`: "+strings.Join(workload.Presets(), ", ")+" (default "+def+")")
	intVar(fs, &f.isl, "isl", f.DefaultISL, 1, maxTokens, "input (prompt) tokens per request, fixed")
	intVar(fs, &f.osl, "osl", f.DefaultOSL, 1, maxTokens, "output (generated) tokens per request, fixed")
	intVar(fs, &f.concurrency, "concurrency", f.DefaultConcurrency, 1, maxClients, "closed-loop concurrency (clients with a request in flight)")
	fs.StringVar(&f.rate, "rate", "", "Poisson request `rate` per second, or inf for an offline run")
	intVar(fs, &f.requests, "num-requests", 0, 1, maxRequests, "requests of a run (default: the workload's)")
	intVar(fs, &f.limit, "context", 0, 1, maxTokens, "per-request context limit in tokens, prompt + output (default: the workload's)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the sampled lengths, arrivals and prompts")
}

// allowLongFlag is the flag of every command that lets a context run past
// the model's max_position_embeddings (workload.ContextRule.AllowFlag).
const allowLongFlag = "--allow-long-context"

// Set reports whether the named flag was given on the command line.
func (f *workloadFlags) Set(name string) bool {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

// Preset returns the --workload value ("" when not given).
func (f *workloadFlags) Preset() string { return f.preset }

// Workload builds the workload the flags describe, after parsing. Errors
// are usage errors that name the flag.
func (f *workloadFlags) Workload() (*workload.Workload, error) {
	lengths := f.Set("isl") || f.Set("osl")
	switch {
	case f.preset != "" && lengths:
		return nil, Usagef("--workload sets the lengths; give either --workload or --isl/--osl, not both")
	case f.Set("isl") && f.isl < 1:
		return nil, Usagef("--isl must be ≥ 1 (input length in tokens), got %d", f.isl)
	case f.Set("osl") && f.osl < 1:
		return nil, Usagef("--osl must be ≥ 1 (output length in tokens), got %d", f.osl)
	case f.Set("concurrency") && f.concurrency < 1:
		return nil, Usagef("--concurrency must be ≥ 1, got %d", f.concurrency)
	case f.requests < 0:
		return nil, Usagef("--num-requests must be ≥ 0, got %d", f.requests)
	case f.limit < 0:
		return nil, Usagef("--context must be ≥ 0, got %d", f.limit)
	}
	var w workload.Workload
	if name := f.preset; name != "" || !lengths && f.DefaultPreset != "" {
		if name == "" {
			name = f.DefaultPreset
		}
		p, err := workload.Preset(name)
		if err != nil {
			return nil, Usagef("--workload: %v", err)
		}
		w = p
		if f.Set("concurrency") {
			w.Concurrency, w.Rate = f.concurrency, 0
		}
	} else {
		if f.isl < 1 || f.osl < 1 {
			return nil, Usagef("--isl and --osl are both needed without --workload")
		}
		c := f.concurrency
		if c == 0 {
			c = 1
		}
		w = workload.FixedClosed(f.isl, f.osl, c)
	}
	if f.Set("rate") {
		r, err := workload.ParseRate(f.rate)
		if err != nil {
			return nil, Usagef("--rate: %v", err)
		}
		w.Rate = r
		if !f.Set("concurrency") {
			w.Concurrency = 0
		}
	}
	if f.requests > 0 {
		w.NumRequests = f.requests
	}
	if f.limit > 0 {
		w.ContextLimit = f.limit
	}
	w.Seed = f.seed
	if err := w.Validate(); err != nil {
		return nil, Usagef("%v", err)
	}
	return &w, nil
}
