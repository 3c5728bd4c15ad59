package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Hand-off to lm-evaluation-harness (EleutherAI) for a model the native
// engine cannot run at its size: HarnessScript writes the harness's
// command lines for a suite, and ImportHarness reads the results files
// they produce back into a Report, so that the same suite table and
// report show them.

// HarnessOptions says how the harness reaches the model.
type HarnessOptions struct {
	Suite string // a Suites name
	// Model is the checkpoint directory (or Hugging Face id) vLLM loads
	// (--model vllm), or, with Endpoint, the model name the server serves.
	Model string
	// Endpoint is an OpenAI-compatible completions URL of a server already
	// serving Model (vllm serve: http://HOST:8000/v1/completions); "" runs
	// vLLM inside the harness.
	Endpoint string
	// Tokenizer is the tokenizer the harness tokenizes requests with
	// against an endpoint (default: Model).
	Tokenizer string
	// Output is the directory the harness writes its results under.
	Output string
	Limit  int // --limit: items per task (0: all)
}

// HarnessScript returns a POSIX shell script running suite o.Suite on the
// harness. Its settings match the native ones test by test: each task's
// own prompt and its default few-shot count where that is ours (GSM8K 8,
// MBPP 3, the others 0), a second invocation with --num_fewshot for the
// tests whose count differs from the harness's default (MMLU: 5), and the
// tasks' own greedy generation settings (do_sample false in their
// generation_kwargs; HumanEval as humaneval_greedy, whose
// humaneval-greedy.yaml decodes greedily where humaneval.yaml samples).
// The model arguments are those of the harness's lm_eval/models/
// vllm_causallms.py VLLM (pretrained, dtype, gpu_memory_utilization) and
// openai_completions.py LocalCompletionsAPI (model, base_url, tokenizer,
// num_concurrent, max_retries). HumanEval and MBPP run generated code, for
// which the harness wants --confirm_run_unsafe_code and
// HF_ALLOW_CODE_EVAL=1.
func HarnessScript(o HarnessOptions) (string, error) {
	if err := o.Validate(); err != nil {
		return "", err
	}
	s := Suites[o.Suite]
	type run struct {
		shots  int // -1: the tasks' defaults
		tasks  []string
		unsafe bool // runs generated code
	}
	var runs []*run
	byShots := map[int]*run{}
	unsafe := false
	for _, t := range s.Tests {
		k := -1
		if t.Shots != harnessDefaultShots[t.Harness] {
			k = t.Shots
		}
		r := byShots[k]
		if r == nil {
			r = &run{shots: k}
			byShots[k] = r
			runs = append(runs, r)
		}
		r.tasks = append(r.tasks, t.Harness)
		r.unsafe = r.unsafe || t.Category == "coding"
		unsafe = unsafe || r.unsafe
	}
	var modelArgs string
	model := "vllm"
	if o.Endpoint == "" {
		modelArgs = "pretrained=" + o.Model + ",dtype=auto,gpu_memory_utilization=0.8"
	} else {
		model = "local-completions"
		tok := o.Tokenizer
		if tok == "" {
			tok = o.Model
		}
		modelArgs = "model=" + o.Model + ",base_url=" + o.Endpoint + ",tokenizer=" + tok + ",num_concurrent=8,max_retries=3"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# lm-evaluation-harness run of the %s suite (%s),\n# written by autocompress eval --engine lm-eval.\n", s.Name, s.About)
	b.WriteString("# Tests, harness tasks and few-shot examples:\n")
	for _, t := range s.Tests {
		fmt.Fprintf(&b, "#   %-22s %-16s %d-shot  %s\n", t.Category, t.Harness, t.Shots, t.HarnessMetrics[0])
	}
	b.WriteString("# The harness reads its copies of these sets from the Hugging Face Hub (reachable, or cached\n# with HF_DATASETS_OFFLINE=1); its MMLU is the canonical 14,042 questions.\n")
	if unsafe {
		b.WriteString("# HumanEval and MBPP execute the code the model writes: run this in a sandbox.\n")
	}
	b.WriteString("# Then: autocompress eval --import")
	for i := range runs {
		fmt.Fprintf(&b, " %s/*/results_*.json", shellQuote(filepath.Join(o.Output, runName(i, runs[i].shots))))
	}
	b.WriteString("\nset -eu\n")
	if unsafe {
		b.WriteString("export HF_ALLOW_CODE_EVAL=1\n")
	}
	for i, r := range runs {
		fmt.Fprintf(&b, "lm_eval --model %s \\\n  --model_args %s \\\n  --tasks %s \\\n", model, shellQuote(modelArgs), strings.Join(r.tasks, ","))
		if r.shots >= 0 {
			fmt.Fprintf(&b, "  --num_fewshot %d \\\n", r.shots)
		}
		if o.Limit > 0 {
			fmt.Fprintf(&b, "  --limit %d \\\n", o.Limit)
		}
		if r.unsafe {
			b.WriteString("  --confirm_run_unsafe_code \\\n")
		}
		fmt.Fprintf(&b, "  --batch_size auto \\\n  --seed 1234 \\\n  --output_path %s\n", shellQuote(filepath.Join(o.Output, runName(i, r.shots))))
	}
	return b.String(), nil
}

// harnessDefaultShots are the harness's num_fewshot of its tasks' YAML
// (absent: 0): lm_eval/tasks/gsm8k/gsm8k-cot.yaml 8 (its fixed
// exemplars), gsm8k.yaml 5, mbpp/mbpp.yaml 3.
var harnessDefaultShots = map[string]int{"gsm8k_cot": 8, "gsm8k": 5, "mbpp": 3}

func runName(_, shots int) string {
	if shots < 0 {
		return "shots-default"
	}
	return fmt.Sprintf("shots-%d", shots)
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func shellQuote(s string) string {
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:@+", r)) {
			safe = false
			break
		}
	}
	if safe && s != "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// harnessResults is the part of the harness's results file read here.
// Its layout is that of lm_eval/evaluator.py's evaluate() results_dict
// (results, groups, group_subtasks, configs, versions, n-shot,
// higher_is_better, n-samples), to which simple_evaluate adds config
// (model, model_args, ...) and the evaluation tracker model_name: in
// "results", each task maps "METRIC,FILTER" to a number and
// "METRIC_stderr,FILTER" to its standard error (a number, or "N/A" for
// aggregations without one).
type harnessResults struct {
	Results  map[string]map[string]json.RawMessage `json:"results"`
	Groups   map[string]map[string]json.RawMessage `json:"groups"`
	Subtasks map[string][]string                   `json:"group_subtasks"`
	NShot    map[string]json.RawMessage            `json:"n-shot"`
	NSamples map[string]struct {
		Original  int `json:"original"`
		Effective int `json:"effective"`
	} `json:"n-samples"`
	Config *struct {
		Model     any `json:"model"`
		ModelArgs any `json:"model_args"`
	} `json:"config"`
	ModelName string `json:"model_name"`
}

// ImportHarness reads harness results files into a Report, one model per
// distinct model, in order of first appearance: a spec is FILE or
// NAME=FILE (NAME labels the model; else the file's model_name, else its
// model_args' pretrained= or model=, else the file name). Files of the
// same model (one per invocation of HarnessScript) are merged. Tasks and
// metrics the suites know are renamed to ours (humaneval_greedy's
// "pass_at_1,n=1" is humaneval's pass@1); others keep the harness's task
// name and their metric name, with ",FILTER" when the filter is not
// "none".
func ImportHarness(specs []string) (*Report, error) {
	rep := &Report{}
	index := map[string]int{}
	for _, spec := range specs {
		label, path, ok := strings.Cut(spec, "=")
		if !ok {
			label, path = "", spec
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		hr, err := parseHarness(path, b)
		if err != nil {
			return nil, err
		}
		if label == "" {
			label = harnessModelName(hr, path)
		}
		i, ok := index[label]
		if !ok {
			i = len(rep.Models)
			index[label] = i
			rep.Models = append(rep.Models, ModelReport{Model: label})
		}
		mr := &rep.Models[i]
		tasks, err := harnessTasks(path, hr)
		if err != nil {
			return nil, err
		}
		for _, t := range tasks {
			replaced := false
			for k := range mr.Tasks {
				if mr.Tasks[k].Task == t.Task {
					mr.Tasks[k], replaced = t, true
				}
			}
			if !replaced {
				mr.Tasks = append(mr.Tasks, t)
			}
		}
	}
	if len(rep.Models) == 0 {
		return nil, errors.New("eval: no results files to import")
	}
	return rep, nil
}

func parseHarness(path string, b []byte) (*harnessResults, error) {
	want := `want lm-evaluation-harness's results file ({"results": {"TASK": {"METRIC,FILTER": value, "METRIC_stderr,FILTER": stderr}}, "versions": ..., "n-shot": ..., "configs": ...})`
	var hr harnessResults
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&hr); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		line := 0
		switch {
		case errors.As(err, &se):
			line = 1 + bytes.Count(b[:min(len(b), int(se.Offset))], []byte("\n"))
		case errors.As(err, &te):
			line = 1 + bytes.Count(b[:min(len(b), int(te.Offset))], []byte("\n"))
		}
		return nil, &FormatError{File: path, Line: line, Msg: want + ": " + err.Error()}
	}
	if len(hr.Results) == 0 {
		return nil, &FormatError{File: path, Msg: want + `: no "results"`}
	}
	return &hr, nil
}

func harnessModelName(hr *harnessResults, path string) string {
	if hr.ModelName != "" {
		return hr.ModelName
	}
	if hr.Config != nil {
		args := ""
		switch a := hr.Config.ModelArgs.(type) {
		case string:
			args = a
		case map[string]any:
			for _, k := range []string{"pretrained", "model"} {
				if v, ok := a[k].(string); ok {
					return v
				}
			}
		}
		for _, kv := range strings.Split(args, ",") {
			k, v, _ := strings.Cut(kv, "=")
			if k == "pretrained" || k == "model" {
				return v
			}
		}
	}
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// suiteTestByHarness finds a suite test by its harness task name.
func suiteTestByHarness(task string) *SuiteTest {
	for _, s := range Suites {
		for i := range s.Tests {
			if s.Tests[i].Harness == task {
				return &s.Tests[i]
			}
		}
	}
	return nil
}

// harnessTasks converts the file's results: a group's tasks (MMLU's
// subjects and categories, per group_subtasks) become its subtasks, so
// that the top level holds the tasks run (and the groups), in name order.
func harnessTasks(path string, hr *harnessResults) ([]TaskResult, error) {
	for g, res := range hr.Groups {
		if _, ok := hr.Results[g]; !ok {
			hr.Results[g] = res
		}
	}
	child := map[string]bool{}
	for _, cs := range hr.Subtasks {
		for _, c := range cs {
			child[c] = true
		}
	}
	names := make([]string, 0, len(hr.Results))
	for n := range hr.Results {
		if !child[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var out []TaskResult
	for _, name := range names {
		tr, err := harnessTask(path, hr, name, 0)
		if err != nil {
			return nil, err
		}
		if len(tr.Metrics) > 0 {
			out = append(out, tr)
		}
	}
	return out, nil
}

func harnessTask(path string, hr *harnessResults, name string, depth int) (TaskResult, error) {
	res := hr.Results[name]
	tr := TaskResult{Task: name, Kind: "lm-evaluation-harness", Items: hr.NSamples[name].Effective}
	if depth == 0 {
		tr.Source = path
	}
	st := suiteTestByHarness(name)
	if st != nil {
		tr.Task = st.Task
	}
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		metric, filter, ok := strings.Cut(k, ",")
		if !ok || strings.HasSuffix(metric, "_stderr") {
			continue // "alias", "name" and the standard errors
		}
		v, ok := harnessNumber(res[k])
		if !ok {
			return tr, &FormatError{File: path, Msg: fmt.Sprintf("results.%s[%q] = %s: want a number", name, k, res[k])}
		}
		se, _ := harnessNumber(res[metric+"_stderr,"+filter]) // "N/A" or absent: 0
		m := Metric{Name: metric, Value: v, Stderr: se}
		if filter != "none" {
			m.Name = metric + "," + filter
		}
		if st != nil {
			for _, hk := range st.HarnessMetrics {
				if hk == k {
					m.Name = st.Metric
				}
			}
		}
		tr.Metrics = append(tr.Metrics, m)
	}
	if depth < 8 {
		for _, c := range hr.Subtasks[name] {
			if _, ok := hr.Results[c]; !ok {
				continue
			}
			sub, err := harnessTask(path, hr, c, depth+1)
			if err != nil {
				return tr, err
			}
			tr.Subtasks = append(tr.Subtasks, sub)
		}
	}
	if tr.Items == 0 { // a group has no n-samples of its own: its tasks' sum
		for _, s := range tr.Subtasks {
			tr.Items += s.Items
		}
	}
	return tr, nil
}

// harnessNumber reads a metric value: a JSON number (false for "N/A",
// null or anything else).
func harnessNumber(raw json.RawMessage) (float64, bool) {
	if raw == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil
}
