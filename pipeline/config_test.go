package pipeline

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestPrintConfigRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := PrintConfig(&b, DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	got, err := ParseConfig("printed", b.Bytes())
	if err != nil {
		t.Fatalf("the printed default does not parse: %v\n%s", err, b.String())
	}
	if !reflect.DeepEqual(got, DefaultConfig()) {
		t.Fatalf("round trip changed the config:\n got %+v\nwant %+v", got, DefaultConfig())
	}
	// Every field is documented with its flag.
	n := 0
	walkFields(reflect.TypeOf(Config{}), nil, func(f reflect.StructField, _ []int) {
		n++
		if !strings.Contains(b.String(), "[--"+f.Tag.Get("flag")+"]") {
			t.Errorf("field %s has no documented flag", f.Name)
		}
		if f.Tag.Get("help") == "" {
			t.Errorf("field %s has no help", f.Name)
		}
	})
	if n < 30 {
		t.Fatalf("only %d fields", n)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"model: parent\nbudgtes:\n  max_memory: 1GiB\n", "line 2: field budgtes not found"},
		{"workload:\n  isl: lots\n", "line 2: cannot unmarshal !!str `lots` into int"},
		{"search:\n  keep_layers: 3\n", "line 2"},
		{"distill:\n  tokenz: 5\n", "field tokenz not found in section Distill"},
		{"model: [a\n", "line 1"},
	} {
		_, err := ParseConfig("c.yaml", []byte(tc.yaml))
		var ce *ConfigError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "c.yaml: ") {
			t.Errorf("%q: err = %v, want one naming c.yaml and %q", tc.yaml, err, tc.want)
		} else if !errorsAs(err, &ce) {
			t.Errorf("%q: not a ConfigError", tc.yaml)
		}
	}
}

func errorsAs(err error, ce **ConfigError) bool {
	e, ok := err.(*ConfigError)
	*ce = e
	return ok
}

func TestParseConfigKeepsDefaults(t *testing.T) {
	c, err := ParseConfig("c", []byte("budgets:\n  max_memory: 64MiB\nworkload:\n  osl: 32\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Budgets.MaxMemory, want.Workload.OSL = "64MiB", 32
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got %+v", c)
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	file, err := ParseConfig("c", []byte("workload:\n  isl: 256\n  osl: 32\nsearch:\n  keep_layers: [0, 7]\n"))
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	scratch := DefaultConfig()
	apply := BindFlags(fs, &scratch)
	if err := fs.Parse([]string{"--osl", "16", "--keep-layers", "1,2", "--keep-layers", "3", "--p90", "--lr", "3e-4", "--max-tpot", "20ms"}); err != nil {
		t.Fatal(err)
	}
	if err := apply(&file); err != nil {
		t.Fatal(err)
	}
	if file.Workload.ISL != 256 || file.Workload.OSL != 16 || !reflect.DeepEqual(file.Search.KeepLayers, []int{1, 2, 3}) ||
		!file.Budgets.P90 || file.Distill.LR != 3e-4 || file.Budgets.MaxTPOT != "20ms" || file.Model != "parent" {
		t.Fatalf("got %+v", file)
	}
	fs2 := flag.NewFlagSet("run", flag.ContinueOnError)
	fs2.SetOutput(io.Discard)
	s2 := DefaultConfig()
	BindFlags(fs2, &s2)
	if err := fs2.Parse([]string{"--isl", "many"}); err == nil || !strings.Contains(err.Error(), "-isl") || !strings.Contains(err.Error(), "whole number") {
		t.Fatalf("bad flag value: %v", err)
	}
}

// TestTopKTrainConfig: the top-k training's token count is a ranged field
// and flag, needs held-out proxy rows under minitron, and is an input of the
// search stage only where it is used.
func TestTopKTrainConfig(t *testing.T) {
	c, err := ParseConfig("c", []byte("search:\n  strategy: minitron\n  topk_train_tokens: 4096\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Search.TopKTrainTokens != 4096 || DefaultConfig().Search.TopKTrainTokens <= 0 {
		t.Fatalf("topk_train_tokens %d (default %d)", c.Search.TopKTrainTokens, DefaultConfig().Search.TopKTrainTokens)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s := DefaultConfig()
	BindFlags(fs, &s)
	if err := fs.Parse([]string{"--topk-train-tokens", "-1"}); err == nil || !strings.Contains(err.Error(), "topk-train-tokens") {
		t.Errorf("--topk-train-tokens -1: %v", err)
	}

	demo := func(strategy string, tokens int64, proxyRows int) Config {
		c := DemoConfig()
		c.Search.Strategy, c.Search.TopKTrainTokens, c.Search.ProxyRows = strategy, tokens, proxyRows
		return c
	}
	if _, err := Stages(demo("minitron", 4096, 0), ""); err == nil || !strings.Contains(err.Error(), "search.topk_train_tokens") {
		t.Errorf("minitron training without proxy rows: %v, want an error naming search.topk_train_tokens", err)
	}
	if _, err := Stages(demo("autocompress", 4096, 0), ""); err != nil {
		t.Errorf("autocompress ignores topk_train_tokens: %v", err)
	}
	params := func(c Config) string {
		st, err := Stages(c, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Name == "search" {
				b, err := json.Marshal(s.Params)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
		}
		t.Fatal("no search stage")
		return ""
	}
	if params(demo("minitron", 4096, 16)) == params(demo("minitron", 8192, 16)) {
		t.Error("minitron: the search stage does not depend on topk_train_tokens")
	}
	if params(demo("autocompress", 4096, 16)) != params(demo("autocompress", 8192, 16)) {
		t.Error("autocompress: the search stage depends on the unused topk_train_tokens")
	}
	a, b := demo("minitron", 4096, 16), demo("minitron", 4096, 16)
	b.Distill.LR *= 2
	if params(a) == params(b) {
		t.Error("minitron: the search stage does not depend on the training recipe")
	}
}

// TestInvocationsConfig: measure.invocations defaults to 3, is a field and
// a flag with a minimum of 1, and the measure stage (and the search stage's
// measured checks) depend on it; the pause between invocations does not
// change the measure stage's inputs.
func TestInvocationsConfig(t *testing.T) {
	if d := DefaultConfig().Measure; d.Invocations != 3 || d.GapSeconds <= 0 {
		t.Fatalf("default measure %+v, want 3 invocations a pause apart", d)
	}
	c, err := ParseConfig("c", []byte("measure:\n  invocations: 5\n  gap_s: 0.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Measure.Invocations != 5 || c.Measure.GapSeconds != 0.5 {
		t.Fatalf("parsed %+v", c.Measure)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	s := DefaultConfig()
	apply := BindFlags(fs, &s)
	if err := fs.Parse([]string{"--measure-invocations", "2"}); err != nil {
		t.Fatal(err)
	}
	if err := apply(&c); err != nil || c.Measure.Invocations != 2 {
		t.Fatalf("--measure-invocations 2: %v, %+v", err, c.Measure)
	}
	fs2 := flag.NewFlagSet("run", flag.ContinueOnError)
	fs2.SetOutput(io.Discard)
	s2 := DefaultConfig()
	BindFlags(fs2, &s2)
	if err := fs2.Parse([]string{"--measure-invocations", "0"}); err == nil || !strings.Contains(err.Error(), "measure-invocations") {
		t.Errorf("--measure-invocations 0: %v", err)
	}
	zero, err := ParseConfig("c", []byte("measure:\n  invocations: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Stages(zero, ""); err == nil || !strings.Contains(err.Error(), "measure.invocations") {
		t.Errorf("invocations 0: %v, want an error naming measure.invocations", err)
	}

	params := func(c Config, stage string) string {
		st, err := Stages(c, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			if s.Name == stage {
				b, err := json.Marshal(s.Params)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
		}
		t.Fatalf("no %s stage", stage)
		return ""
	}
	a, b := DemoConfig(), DemoConfig()
	b.Measure.Invocations = a.Measure.Invocations + 1
	for _, stage := range []string{"measure", "search"} {
		if params(a, stage) == params(b, stage) {
			t.Errorf("the %s stage does not depend on measure.invocations", stage)
		}
	}
	b = DemoConfig()
	b.Measure.GapSeconds = a.Measure.GapSeconds + 1
	for _, stage := range []string{"measure", "search"} {
		if params(a, stage) != params(b, stage) {
			t.Errorf("the %s stage depends on the pause between invocations", stage)
		}
	}
}

// TestRunSettingsRangedBothWays (issue 17, crashes and overflows): every
// numeric setting of a run but the seeds has a minimum and a maximum; the
// flag refuses the largest integer (or float) and a config file setting it
// is refused naming its YAML path, before any stage runs.
func TestRunSettingsRangedBothWays(t *testing.T) {
	checked := 0
	walkFields(reflect.TypeOf(Config{}), nil, func(f reflect.StructField, path []int) {
		name := f.Tag.Get("flag")
		k := f.Type.Kind()
		if name == "" || (k != reflect.Int && k != reflect.Int64 && k != reflect.Float64) || strings.HasSuffix(name, "seed") {
			return
		}
		checked++
		if f.Tag.Get("min") == "" || f.Tag.Get("max") == "" {
			t.Errorf("--%s: no min and max tags", name)
			return
		}
		huge := "9223372036854775807"
		if k == reflect.Float64 {
			huge = "1e308"
		}
		c := DefaultConfig()
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		BindFlags(fs, &c)
		if err := fs.Parse([]string{"--" + name, huge}); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("--%s %s: %v, want out of range", name, huge, err)
		}
		c = DefaultConfig()
		v := reflect.ValueOf(&c).Elem().FieldByIndex(path)
		if k == reflect.Float64 {
			v.SetFloat(1e308)
		} else {
			v.SetInt(1 << 62)
		}
		var ce *ConfigError
		if err := CheckRanges(c); err == nil || !errorsAs(err, &ce) || !strings.Contains(err.Error(), "above its maximum") {
			t.Errorf("%s at its type's limit: CheckRanges %v", name, err)
		}
	})
	if checked < 20 {
		t.Fatalf("checked %d numeric settings: the walk is broken", checked)
	}
}
