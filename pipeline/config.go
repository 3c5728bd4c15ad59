package pipeline

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/autocompress/autocompress/search/trained"
)

// Config is a whole run: the parent, the data, the deployment, the budgets
// and each stage's settings. It is read from YAML (LoadConfig; unknown fields
// and values of the wrong type are errors naming the line), and every field
// is also a command-line flag (the `flag` tag; BindFlags). PrintConfig writes
// the commented default.
type Config struct {
	Model    string   `yaml:"model" flag:"model" help:"parent checkpoint directory, or \"parent\" for the embedded parent"`
	Data     []string `yaml:"data" flag:"data" help:"calibration and distillation text files (\"parent:train-sample\" names the embedded sample of the parent's training split, \"parent:train\" the whole split, read from the assets of scripts/fetch-assets.sh)"`
	EvalData []string `yaml:"eval_data" flag:"eval-data" help:"held-out text for evaluation (\"parent:test\" names the embedded parent's test split)"`
	// Dir is the run directory; every stage's output is kept under it.
	Dir string `yaml:"dir" flag:"dir" help:"run directory: each stage's output and manifest is kept under it, and a rerun reuses what is unchanged"`
	// Assets is the module root holding testdata/ext, for parent:train.
	Assets string `yaml:"assets" flag:"assets" help:"folder holding testdata/ext (scripts/fetch-assets.sh), for the parent's full training split"`

	Deployment Deployment `yaml:"deployment"`
	Workload   Workload   `yaml:"workload"`
	Budgets    Budgets    `yaml:"budgets"`
	Importance Importance `yaml:"importance"`
	Search     Search     `yaml:"search"`
	Distill    Distill    `yaml:"distill"`
	Eval       Eval       `yaml:"eval"`
	Measure    Measure    `yaml:"measure"`
}

// Deployment is the target.
type Deployment struct {
	GPU       string `yaml:"gpu" flag:"gpu" help:"target device (autocompress estimate --gpu list); cpu-local is this machine"`
	Engine    string `yaml:"engine" flag:"engine" help:"serving engine: native, vllm, sglang, trtllm, llamacpp"`
	Precision string `yaml:"precision" flag:"precision" help:"serving precision (empty: the engine's default for the target)"`
	TP        int    `yaml:"tp" flag:"tp" help:"tensor-parallel GPUs" min:"1" max:"64"`
	ServeOn   string `yaml:"serve_on" flag:"serve-on" help:"engine whose loading rules the child must satisfy (empty: the serving engine)"`
}

// Workload is the serving workload.
type Workload struct {
	Name        string  `yaml:"name" flag:"workload" help:"a named workload preset (empty: the lengths below)"`
	ISL         int     `yaml:"isl" flag:"isl" help:"prompt tokens per request" min:"0" max:"67108864"`
	OSL         int     `yaml:"osl" flag:"osl" help:"output tokens per request" min:"0" max:"67108864"`
	Concurrency int     `yaml:"concurrency" flag:"concurrency" help:"concurrent requests (closed loop)" min:"0" max:"65536"`
	Rate        float64 `yaml:"rate" flag:"rate" help:"request rate in req/s (open loop; 0: closed loop at the concurrency)" min:"0" max:"1e6"`
}

// Budgets are the limits the child must meet, as the search takes them
// (values with units; empty: no budget).
type Budgets struct {
	MaxMemory     string `yaml:"max_memory" flag:"max-memory" help:"the engine's whole footprint, e.g. 13.96GiB, 64MiB, or 0.8x (of the parent's: measured on this machine when it is the target, else estimated)"`
	MaxTTFT       string `yaml:"max_ttft" flag:"max-ttft" help:"time to first token, e.g. 500ms or 0.5x (of the parent's)"`
	MaxTPOT       string `yaml:"max_tpot" flag:"max-tpot" help:"time per output token, e.g. 40ms or 0.6x (of the parent's)"`
	MaxE2E        string `yaml:"max_e2e" flag:"max-e2e" help:"end-to-end request latency, e.g. 11.5s or 0.7x (of the parent's)"`
	MinThroughput string `yaml:"min_throughput" flag:"min-throughput" help:"output throughput, e.g. 2000tok/s or 1.5x (of the parent's)"`
	MaxParams     string `yaml:"max_params" flag:"max-params" help:"parameters, e.g. 3B, 2.5M"`
	P90           bool   `yaml:"p90" flag:"p90" help:"latency budgets apply to the p90 rather than the mean"`
	// Margin is search.ParseMargin's spec ("" is auto).
	Margin string `yaml:"margin" flag:"margin" help:"allowance for the estimator's error: auto or empty (GPU engines: the q90 of the held-out shortfall of the deployment's class; native: its calibrated held-out error), q50/q80/q90, a fraction or percentage for every cost (0 disables), or per cost, e.g. tpot=15%,memory=5%"`
}

// Importance configures the importance pass.
type Importance struct {
	Seqs   int `yaml:"seqs" flag:"importance-seqs" help:"calibration sequences" min:"1" max:"1048576"`
	SeqLen int `yaml:"seq_len" flag:"importance-seq-len" help:"tokens per calibration sequence" min:"2" max:"1048576"`
	// Passes is the native computation's budget in equivalent forward
	// passes over all rows (importance.Options.Passes): the skip losses
	// are scored on as many row prefixes as it allows. 0 scores every row
	// in full (the exhaustive scores, about 1 + 1.5·layers passes).
	Passes float64 `yaml:"passes" flag:"importance-passes" help:"budget in equivalent forward passes over all sequences (0: every sequence in full, the exhaustive scores; importance --passes defaults to 4)" min:"0" max:"1e9" json:",omitempty"`
	// Engine computes the scores: native ("" is native) or torch, a
	// PyTorch job run here (package job).
	Engine string `yaml:"engine" flag:"importance-engine" help:"what computes importance: native, or torch (a PyTorch job run here)" json:",omitempty"`
}

// Search configures the architecture search.
type Search struct {
	Strategy   string   `yaml:"strategy" flag:"strategy" help:"autocompress (global and per-layer) or minitron (uniform widths, all layers: the Minitron++ baseline)"`
	TopK       int      `yaml:"top_k" flag:"top-k" help:"candidates ranked by the measured proxy" min:"1" max:"1000"`
	Seed       int64    `yaml:"seed" flag:"search-seed" help:"seed of the search"`
	KeepLayers []int    `yaml:"keep_layers" flag:"keep-layers" help:"layers never removed (comma-separated indices)"`
	ProxyData  []string `yaml:"proxy_data" flag:"proxy-data" help:"held-out text for the measured proxy (KL to the parent of candidates pruned in memory); empty: importance only"`
	ProxyRows  int      `yaml:"proxy_rows" flag:"proxy-rows" help:"rows of 128 tokens of proxy_data the measured proxy scores" min:"0" max:"1048576"`
	// TopKTrainTokens is Minitron++'s brief distillation of each top-k
	// candidate (search/trained, search.Request.TopKMeasurer), with the distill section's
	// recipe on the data, scored on proxy_data.
	TopKTrainTokens int64 `yaml:"topk_train_tokens" flag:"topk-train-tokens" help:"minitron: distillation tokens each top-k candidate is trained on (the distill section's recipe, on data) before the lowest loss on proxy_data is chosen; 0: rank by the loss untrained" min:"0" max:"1e12"`
}

// Distill configures recovery by distillation from the parent.
type Distill struct {
	Tokens      int64   `yaml:"tokens" flag:"distill-tokens" help:"training tokens of recovery (0: skip recovery)" min:"0" max:"1e13"`
	SeqLen      int     `yaml:"seq_len" flag:"distill-seq-len" help:"tokens per training sequence" min:"2" max:"1048576"`
	Batch       int     `yaml:"batch" flag:"distill-batch" help:"sequences per step" min:"1" max:"65536"`
	LR          float64 `yaml:"lr" flag:"lr" help:"peak learning rate" min:"0" max:"10"`
	Temperature float64 `yaml:"temperature" flag:"temperature" help:"distillation temperature" min:"0" max:"100"`
	KDWeight    float64 `yaml:"kd_weight" flag:"kd-weight" help:"weight of KL(parent ‖ child)" min:"0" max:"1000"`
	CEWeight    float64 `yaml:"ce_weight" flag:"ce-weight" help:"weight of cross-entropy on the data" min:"0" max:"1000"`
	Seed        int64   `yaml:"seed" flag:"distill-seed" help:"seed of recovery"`
	// Engine runs the recovery: native (this binary; "" is native) or a
	// PyTorch engine of package job, launched here as a local job whose
	// checked result the stage takes (job/CONTRACT.md).
	Engine    string `yaml:"engine" flag:"distill-engine" help:"what runs recovery: native, or a PyTorch job run here (torch; automodel and megatron-bridge are emitted by the distill command, not run by the pipeline)" json:",omitempty"`
	WorldSize int    `yaml:"world_size" flag:"distill-world-size" help:"ranks of a PyTorch recovery (the batch must be a multiple)" min:"0" max:"65536" json:",omitempty"`
}

// Eval configures the evaluation.
type Eval struct {
	Limit int `yaml:"limit" flag:"eval-limit" help:"examples per task (0: all)" min:"0" max:"16777216"`
	// Suite is a named suite and the directory of its files, NAME=DIR
	// (eval.Suites; avg8=../shared/data/eval); "" for none.
	Suite string `yaml:"suite" flag:"eval-suite" help:"also score parent and child on a named suite, NAME=DIR (avg8=DIR: the paper's eight tests, files named as in ../shared/data/eval); the report shows it" json:",omitempty"`
}

// Measure configures the measurement of the child on the target.
type Measure struct {
	Enabled bool `yaml:"enabled" flag:"measure" help:"measure the child with bench-serve (only where the target is this machine: gpu cpu-local, engine native)"`
	Runs    int  `yaml:"runs" flag:"measure-runs" help:"measured repeats within one bench-serve invocation (the invocation's figure is their median)" min:"1" max:"1000"`
	// Requests is the requests of one measured run when the workload sets
	// no count (workload.Workload.NumRequests 0); a count the workload
	// sets stands.
	Requests int `yaml:"requests" flag:"measure-requests" help:"requests per measured run when the workload sets no count; a count the workload sets stands" min:"1" max:"100000"`
	// Invocations is how many separate bench-serve processes measure each
	// child (the final check and each re-choice round), GapSeconds apart;
	// budgets are judged on the worst invocation, since on a shared
	// machine one process's figure is one draw of an unsteady quantity.
	Invocations int     `yaml:"invocations" flag:"measure-invocations" help:"separate bench-serve invocations per measured child; budgets are judged on the worst (max latency or memory, min throughput)" min:"1" max:"1000"`
	GapSeconds  float64 `yaml:"gap_s" flag:"measure-gap" help:"seconds of pause between two invocations" min:"0" max:"3600"`
	// Rounds is how many times the search may re-choose after measuring
	// the pruned child (before distillation: the costs do not depend on
	// the weights) and finding a budget missed or met with room (0: no
	// check).
	Rounds int `yaml:"rounds" flag:"measure-rounds" help:"re-choices after measuring the pruned child before distillation: a missed budget tightened and a met one loosened by estimated/measured (measured being the worst invocation), then bisected between the loosest limit that measured met and the tightest that missed (0: no check)" min:"0" max:"100"`
}

// DefaultConfig is the embedded demo: the embedded parent on this machine's
// CPU with the native engine.
func DefaultConfig() Config {
	return Config{
		Model:      "parent",
		Data:       []string{"parent:train-sample"},
		EvalData:   []string{"parent:test"},
		Dir:        "autocompress-run",
		Assets:     ".",
		Deployment: Deployment{GPU: "cpu-local", Engine: "native", TP: 1},
		Workload:   Workload{ISL: 128, OSL: 64, Concurrency: 4},
		Importance: Importance{Seqs: 64, SeqLen: 128},
		Search: Search{Strategy: "autocompress", TopK: 4, Seed: 1, KeepLayers: []int{},
			ProxyData: []string{"parent:validation"}, ProxyRows: 16, TopKTrainTokens: trained.DefaultTokens},
		Distill: Distill{Tokens: 400_000, SeqLen: 128, Batch: 8, LR: 1e-3, Temperature: 1,
			KDWeight: 1, CEWeight: 0, Seed: 1},
		Eval:    Eval{Limit: 200},
		Measure: Measure{Enabled: true, Runs: 3, Requests: DefaultMeasureRequests, Invocations: 3, GapSeconds: 3, Rounds: 2},
	}
}

// ConfigError is a config file that cannot be used; it names the file and,
// where known, the line.
type ConfigError struct {
	Path string
	Msg  string
	// Err, when set, is the error Msg says (a command may rewrite it in
	// its own terms: errors.As finds it).
	Err error
}

func (e *ConfigError) Error() string { return e.Path + ": " + e.Msg }
func (e *ConfigError) Unwrap() error { return e.Err }

// LoadConfig reads a YAML config over the defaults: fields it does not name
// keep their default. Unknown fields and values of the wrong type are errors
// naming the line.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("pipeline: %w", err)
	}
	return ParseConfig(path, b)
}

// ParseConfig is LoadConfig on bytes; name is used in errors.
func ParseConfig(name string, b []byte) (Config, error) {
	c := DefaultConfig()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		msg := err.Error()
		msg = strings.TrimPrefix(msg, "yaml: ")
		msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
		msg = strings.ReplaceAll(msg, "in type pipeline.", "in section ")
		return Config{}, &ConfigError{Path: name, Msg: msg}
	}
	return c, nil
}

// BindFlags declares one flag per config field on fs, defaulting to c's
// values, and returns the function that applies the flags the user set over
// a config (so a flag overrides the file, and the file the defaults).
func BindFlags(fs *flag.FlagSet, c *Config) func(dst *Config) error {
	type bound struct {
		name string
		path []int
	}
	var all []bound
	walkFields(reflect.TypeOf(*c), nil, func(f reflect.StructField, path []int) {
		name := f.Tag.Get("flag")
		if name == "" {
			return
		}
		v := reflect.ValueOf(c).Elem().FieldByIndex(path)
		fs.Var(&fieldValue{v: v, min: f.Tag.Get("min"), max: f.Tag.Get("max")}, name, f.Tag.Get("help"))
		all = append(all, bound{name, path})
	})
	return func(dst *Config) error {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, b := range all {
			if set[b.name] {
				reflect.ValueOf(dst).Elem().FieldByIndex(b.path).Set(reflect.ValueOf(c).Elem().FieldByIndex(b.path))
			}
		}
		return nil
	}
}

func walkFields(t reflect.Type, prefix []int, fn func(reflect.StructField, []int)) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		path := append(append([]int(nil), prefix...), i)
		if f.Type.Kind() == reflect.Struct {
			walkFields(f.Type, path, fn)
			continue
		}
		fn(f, path)
	}
}

// fieldValue is a flag.Value over one config field.
type fieldValue struct {
	v   reflect.Value
	min string // the smallest valid value of a number ("" none)
	max string // the largest ("" none)
	set bool   // a list flag given twice appends
}

func (f *fieldValue) String() string {
	if !f.v.IsValid() {
		return ""
	}
	return scalarString(f.v)
}

func (f *fieldValue) IsBoolFlag() bool { return f.v.IsValid() && f.v.Kind() == reflect.Bool }

func (f *fieldValue) Set(s string) error {
	v := f.v
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("want true or false, not %q", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
		if err != nil {
			return fmt.Errorf("want a whole number, not %q", s)
		}
		v.SetInt(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("want a number, not %q", s)
		}
		v.SetFloat(x)
	case reflect.Slice:
		if !f.set {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			f.set = true
		}
		for _, part := range strings.Split(s, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			e := reflect.New(v.Type().Elem()).Elem()
			if err := (&fieldValue{v: e}).Set(part); err != nil {
				return err
			}
			v.Set(reflect.Append(v, e))
		}
	default:
		return fmt.Errorf("unsupported flag type %s", v.Type())
	}
	if f.min != "" && belowMin(v, f.min) || f.max != "" && aboveMax(v, f.max) {
		if f.max == "" {
			return fmt.Errorf("out of range; want a number ≥ %s", f.min)
		}
		return fmt.Errorf("out of range; want a number in [%s, %s]", f.min, f.max)
	}
	return nil
}

// aboveMax reports whether the number v is above the max tag's value.
func aboveMax(v reflect.Value, max string) bool {
	m, err := strconv.ParseFloat(max, 64)
	if err != nil {
		return false
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return float64(v.Int()) > m
	case reflect.Float64:
		return v.Float() > m
	}
	return false
}

// belowMin reports whether the number v is below the min tag's value.
func belowMin(v reflect.Value, min string) bool {
	m, err := strconv.ParseFloat(min, 64)
	if err != nil {
		return false
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return float64(v.Int()) < m
	case reflect.Float64:
		return v.Float() < m || math.IsNaN(v.Float())
	}
	return false
}

// Validate reports the first numeric field out of its range (CheckRanges).
// There is nothing to default: a config is read over DefaultConfig, so a
// field it sets to 0 is 0. Stages checks the rest (the model, the target,
// the budgets) as it resolves them.
func (c *Config) Validate() error { return CheckRanges(*c) }

// CheckRanges returns a *ConfigError naming the first numeric field (by its
// YAML path) below its minimum or above its maximum, as a config file may
// set it.
func CheckRanges(c Config) error {
	var err error
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := 0; i < t.NumField() && err == nil; i++ {
			f := t.Field(i)
			key := prefix + f.Tag.Get("yaml")
			if f.Type.Kind() == reflect.Struct {
				walk(v.Field(i), key+".")
				continue
			}
			if m := f.Tag.Get("min"); m != "" && belowMin(v.Field(i), m) {
				err = &ConfigError{Path: key, Msg: fmt.Sprintf("%s is below its minimum %s (flag --%s)", scalarString(v.Field(i)), m, f.Tag.Get("flag"))}
			} else if m := f.Tag.Get("max"); m != "" && aboveMax(v.Field(i), m) {
				err = &ConfigError{Path: key, Msg: fmt.Sprintf("%s is above its maximum %s (flag --%s)", scalarString(v.Field(i)), m, f.Tag.Get("flag"))}
			}
		}
	}
	walk(reflect.ValueOf(c), "")
	return err
}

func scalarString(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = scalarString(v.Index(i))
		}
		return strings.Join(parts, ",")
	case reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	default:
		return fmt.Sprint(v.Interface())
	}
}

// PrintConfig writes c as commented YAML: every field with its help text, so
// the output is both documentation and a config to edit.
func PrintConfig(w io.Writer, c Config) error {
	var b strings.Builder
	b.WriteString("# autocompress run configuration (autocompress run --config FILE).\n")
	b.WriteString("# Every field is also a flag (shown in brackets); a flag overrides the file.\n")
	printStruct(&b, reflect.ValueOf(c), 0)
	_, err := io.WriteString(w, b.String())
	return err
}

func printStruct(b *strings.Builder, v reflect.Value, indent int) {
	t := v.Type()
	pad := strings.Repeat("  ", indent)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := f.Tag.Get("yaml")
		fv := v.Field(i)
		if f.Type.Kind() == reflect.Struct {
			fmt.Fprintf(b, "\n%s%s:\n", pad, key)
			printStruct(b, fv, indent+1)
			continue
		}
		if h := f.Tag.Get("help"); h != "" {
			fmt.Fprintf(b, "%s# %s [--%s]\n", pad, h, f.Tag.Get("flag"))
		}
		fmt.Fprintf(b, "%s%s: %s\n", pad, key, yamlScalar(fv))
	}
}

func yamlScalar(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return strconv.Quote(v.String())
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = yamlScalar(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		return scalarString(v)
	}
}

// DemoConfig is autocompress demo: the embedded parent, compressed for this
// machine's CPU (the native engine) to fit a memory budget and a per-token
// latency budget that the parent misses, recovered by distillation on a
// sample of its training text, evaluated on its test split.
func DemoConfig() Config {
	c := DefaultConfig()
	c.Dir = "autocompress-demo"
	c.Data = []string{"parent:train-sample"}
	// Relative to the parent measured on this host, so that they mean the
	// same on every machine.
	c.Budgets.MaxMemory = "0.8x"
	c.Budgets.MaxTPOT = "0.6x"
	// No less throughput than the parent: without it, serving the parent
	// itself one sequence at a time meets the TPOT budget on this engine
	// (about 1.0 ms per token at one slot against 2.2 ms at four), and
	// nothing would be cut.
	c.Budgets.MinThroughput = "1x"
	c.Distill.Tokens = 200_000
	c.Eval.Limit = 100
	return c
}
