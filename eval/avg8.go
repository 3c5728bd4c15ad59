package eval

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
)

// A SuiteTest is one test of a named suite: which task, read from which
// file of the suite's directory, scored by which metric, and how
// lm-evaluation-harness names and runs the same test.
type SuiteTest struct {
	Category string // "reasoning", "coding", "knowledge", "instruction following"
	Task     string // the task's name in a Report (and the TaskKinds entry that loads it)
	File     string // its file (or directory) in the suite directory, named as in ../shared/data/eval
	Metric   string // the metric averaged
	Shots    int    // few-shot examples before each question
	// Generation is set for a test scored on generated text (it needs the
	// Generation scoring kind).
	Generation bool
	// Harness is the harness's task name; HarnessMetrics the result keys
	// ("metric,filter") that hold Metric, the first present taken (the key
	// changed between harness versions).
	Harness        string
	HarnessMetrics []string
}

// A Suite is a named set of tests whose scores are averaged.
type Suite struct {
	Name  string
	About string
	Tests []SuiteTest
}

// Suites are the named suites --task NAME=DIR runs. avg8 is the paper's
// average over eight tests, one task per category it names or more:
// reasoning (GSM8K 8-shot chain of thought, the harness's gsm8k_cot;
// ARC-Challenge; Winogrande), coding (HumanEval,
// MBPP 3-shot, pass@1 greedy), knowledge (MMLU 5-shot, TruthfulQA MC2)
// and instruction following (IFEval). Shots and metrics are the harness's
// defaults for those tasks (MMLU is 5-shot here and given --num_fewshot 5
// there).
var Suites = map[string]*Suite{
	"avg8": {Name: "avg8", About: "the paper's eight tests: reasoning, coding, knowledge, instruction following", Tests: []SuiteTest{
		{Category: "reasoning", Task: "gsm8k", File: "gsm8k_test.jsonl", Metric: "exact_match,strict-match", Shots: 8, Generation: true,
			Harness: "gsm8k_cot", HarnessMetrics: []string{"exact_match,strict-match"}},
		{Category: "reasoning", Task: "arc_challenge", File: "arc_challenge_test.jsonl", Metric: "acc_norm",
			Harness: "arc_challenge", HarnessMetrics: []string{"acc_norm,none"}},
		{Category: "reasoning", Task: "winogrande", File: "winogrande_dev.jsonl", Metric: "acc",
			Harness: "winogrande", HarnessMetrics: []string{"acc,none"}},
		{Category: "coding", Task: "humaneval", File: "humaneval.jsonl.gz", Metric: "pass@1", Generation: true,
			Harness: "humaneval_greedy", HarnessMetrics: []string{"pass_at_1,n=1", "pass@1,n=1", "pass@1,create_test", "pass_at_1,none"}},
		{Category: "coding", Task: "mbpp", File: "mbpp.jsonl", Metric: "pass@1", Shots: 3, Generation: true,
			Harness: "mbpp", HarnessMetrics: []string{"pass_at_1,none", "pass_at_1,extract_code", "pass@1,none"}},
		{Category: "knowledge", Task: "mmlu", File: "mmlu", Metric: "acc", Shots: 5,
			Harness: "mmlu", HarnessMetrics: []string{"acc,none"}},
		{Category: "knowledge", Task: "truthfulqa_mc2", File: "truthfulqa_mc.json", Metric: "acc",
			Harness: "truthfulqa_mc2", HarnessMetrics: []string{"acc,none"}},
		{Category: "instruction following", Task: "ifeval", File: "ifeval_input_data.jsonl", Metric: "prompt_level_strict_acc", Generation: true,
			Harness: "ifeval", HarnessMetrics: []string{"prompt_level_strict_acc,none"}},
	}},
}

// SuiteList returns the suites' names, sorted.
func SuiteList() []string {
	names := make([]string, 0, len(Suites))
	for n := range Suites {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SuiteFiles returns the paths of suite name's files that dir holds (a
// test's File may be a directory), in the suite's order: what a cache of
// the suite's scores must hash, since LoadSuite reads exactly these. An
// unknown suite has none.
func SuiteFiles(name, dir string) []string {
	var out []string
	if s, ok := Suites[name]; ok {
		for _, st := range s.Tests {
			path := filepath.Join(dir, st.File)
			if _, err := os.Stat(path); err == nil {
				out = append(out, path)
			}
		}
	}
	return out
}

// Unavailable is a test of a suite that this build cannot score, and why.
type Unavailable struct {
	Task   string `json:"task"`
	Reason string `json:"reason"`
}

// LoadSuite reads suite name's tests from dir (each test's File in it).
// A test whose task this build has no loader for, or whose file dir lacks,
// is not an error: it is returned among the unavailable ones, with the
// reason, so that a report says which tests are missing rather than
// averaging fewer in silence.
func LoadSuite(name, dir string) ([]*Task, []Unavailable, error) {
	s, ok := Suites[name]
	if !ok {
		return nil, nil, &UnknownTaskError{Name: name}
	}
	var tasks []*Task
	var un []Unavailable
	for _, st := range s.Tests {
		k, ok := TaskKinds[st.Task]
		if !ok {
			why := "no loader for it in this build"
			if st.Generation {
				why = "scored on generated text; the generation kind is not in this build"
			}
			un = append(un, Unavailable{Task: st.Task, Reason: why})
			continue
		}
		path := filepath.Join(dir, st.File)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			un = append(un, Unavailable{Task: st.Task, Reason: fmt.Sprintf("no %s in %s", st.File, dir)})
			continue
		}
		ts, err := k.Load(path)
		if err != nil {
			return nil, nil, fmt.Errorf("eval: suite %s, test %s: %w", name, st.Task, err)
		}
		for _, t := range ts {
			if t.Name == st.Task {
				tasks = append(tasks, t)
			}
		}
	}
	return tasks, un, nil
}

// SuiteScores is a suite's table: every test's score per model, and the
// average of the tests measured.
type SuiteScores struct {
	Suite  string     `json:"suite"`
	About  string     `json:"about"`
	Models []string   `json:"models"`
	Rows   []SuiteRow `json:"rows"`
	// Average per model: the mean of the measured tests' scores, with the
	// standard error of that mean for independent tests (√Σse²/k).
	Average []Metric `json:"average"`
	// Measured per model: the tests in its average.
	Measured []int `json:"measured"`
}

// SuiteRow is one test's scores.
type SuiteRow struct {
	Category string  `json:"category"`
	Task     string  `json:"task"`
	Metric   string  `json:"metric"`
	Shots    int     `json:"shots"`
	Items    int     `json:"items,omitempty"`
	Chance   float64 `json:"chance,omitempty"` // a uniform guess's score (0: none)
	// Scores per model, nil where not measured.
	Scores []*Metric `json:"scores"`
	// AtChance per model: the score is within two standard errors of
	// chance (a small model's usual place on the public tasks).
	AtChance []bool `json:"at_chance,omitempty"`
	// Unavailable says why the test was not measured ("" when it was).
	Unavailable string `json:"unavailable,omitempty"`
}

// ScoreSuite builds suite name's table from a report; unavailable are the
// tests LoadSuite could not load (they and the tests the report lacks are
// rows without scores).
func (r *Report) ScoreSuite(name string, unavailable []Unavailable) (*SuiteScores, error) {
	s, ok := Suites[name]
	if !ok {
		return nil, &UnknownTaskError{Name: name}
	}
	out := &SuiteScores{Suite: s.Name, About: s.About}
	for _, m := range r.Models {
		out.Models = append(out.Models, m.Model)
	}
	why := map[string]string{}
	for _, u := range unavailable {
		why[u.Task] = u.Reason
	}
	sums := make([]float64, len(r.Models))
	vars := make([]float64, len(r.Models))
	counts := make([]int, len(r.Models))
	for _, st := range s.Tests {
		row := SuiteRow{Category: st.Category, Task: st.Task, Metric: st.Metric, Shots: st.Shots,
			Scores: make([]*Metric, len(r.Models)), AtChance: make([]bool, len(r.Models)), Unavailable: why[st.Task]}
		for i, m := range r.Models {
			for _, tr := range m.Tasks {
				if tr.Task != st.Task {
					continue
				}
				if met, ok := tr.Metric(st.Metric); ok {
					met := met
					row.Scores[i] = &met
					row.Items, row.Chance = tr.Items, tr.Chance
					row.AtChance[i] = tr.Chance > 0 && math.Abs(met.Value-tr.Chance) <= 2*met.Stderr
					sums[i] += met.Value
					vars[i] += met.Stderr * met.Stderr
					counts[i]++
				}
			}
		}
		if row.Unavailable == "" && allNil(row.Scores) {
			row.Unavailable = "not measured"
		}
		out.Rows = append(out.Rows, row)
	}
	for i := range r.Models {
		var a Metric
		a.Name = "average"
		if counts[i] > 0 {
			a.Value = sums[i] / float64(counts[i])
			a.Stderr = math.Sqrt(vars[i]) / float64(counts[i])
		}
		out.Average = append(out.Average, a)
		out.Measured = append(out.Measured, counts[i])
	}
	return out, nil
}

func allNil(ms []*Metric) bool {
	for _, m := range ms {
		if m != nil {
			return false
		}
	}
	return true
}

// WriteText prints the suite's table: a row per test with every model's
// score ± standard error side by side, chance, the models at chance, and
// the average of the tests measured (saying how many of how many).
func (s *SuiteScores) WriteText(w io.Writer) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s: %s\n", s.Suite, s.About)
	fmt.Fprintln(tw, strings.Join(append(append([]string{"category", "task", "metric", "shots"}, s.Models...), "chance", "note"), "\t"))
	for _, r := range s.Rows {
		row := []string{r.Category, r.Task, r.Metric, fmt.Sprint(r.Shots)}
		var at []string
		for i, m := range r.Scores {
			if m == nil {
				row = append(row, "-")
				continue
			}
			row = append(row, fmt.Sprintf("%.4f ± %.4f", m.Value, m.Stderr))
			if r.AtChance[i] {
				at = append(at, s.Models[i])
			}
		}
		chance, note := "", ""
		if r.Chance > 0 {
			chance = fmt.Sprintf("%.4f", r.Chance)
		}
		switch {
		case r.Unavailable != "":
			note = "unavailable: " + r.Unavailable
		case len(at) > 0:
			note = "at chance: " + strings.Join(at, ", ")
		}
		fmt.Fprintln(tw, strings.Join(append(row, chance, note), "\t"))
	}
	row := []string{"average", "", "", ""}
	var short []string
	for i, a := range s.Average {
		if s.Measured[i] == 0 {
			row = append(row, "-")
		} else {
			row = append(row, fmt.Sprintf("%.4f ± %.4f", a.Value, a.Stderr))
		}
		if s.Measured[i] < len(s.Rows) {
			short = append(short, fmt.Sprintf("%s %d", s.Models[i], s.Measured[i]))
		}
	}
	note := ""
	if len(short) > 0 {
		note = fmt.Sprintf("of the tests measured (%s of %d): not comparable with a full average", strings.Join(short, ", "), len(s.Rows))
	}
	fmt.Fprintln(tw, strings.Join(append(row, "", note), "\t"))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range strings.SplitAfter(buf.String(), "\n") {
		if _, err := io.WriteString(w, strings.TrimRight(l, " \n")+strings.Repeat("\n", strings.Count(l, "\n"))); err != nil {
			return err
		}
	}
	return nil
}
