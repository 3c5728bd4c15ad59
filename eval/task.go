package eval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
)

// Kind is how a task is scored.
type Kind int

const (
	// MultipleChoice items have several choices and one right one: acc is
	// the share of items whose right choice has the highest log-likelihood;
	// acc_norm divides each choice's log-likelihood by its length in
	// characters first (lm-evaluation-harness's len(choice), which is the
	// byte length for ASCII text).
	MultipleChoice Kind = iota
	// Cloze items have one continuation (Choices[0]): acc is the share of
	// items whose continuation greedy decoding produces, perplexity is
	// exp(−mean over items of the continuation's log-likelihood), as the
	// harness reports for LAMBADA.
	Cloze
	// ProbMass items have several true choices (Item.Correct): acc is the
	// mean over items of the probability mass on the true choices, each
	// choice's probability exp(log-likelihood) normalised over the item's
	// choices (TruthfulQA MC2, the harness's process_results_mc2).
	ProbMass
	// Generation items are answered by greedy generation from the context
	// (until a stop sequence, the end-of-text token or the task's token
	// limit), and the task's Gen.Score scores the completions (generate.go).
	Generation
)

func (k Kind) String() string {
	switch k {
	case Cloze:
		return "cloze"
	case ProbMass:
		return "probability-mass"
	case Generation:
		return "generation"
	}
	return "multiple-choice"
}

// Item is one example of a task.
type Item struct {
	// Context is the prompt, few-shot examples included.
	Context string
	// Choices are the candidate continuations, without the delimiter.
	Choices []string
	// Gold is the index of the right choice.
	Gold int
	// Group is a subtask (an MMLU subject, a quiz file); "" for none.
	Group string
	// Contexts, when set, gives every choice its own context (one per
	// choice): choice k is Choices[k] scored after Contexts[k], and Context
	// is unused. Winogrande's partial scoring fills the blank with each
	// option in the context and scores the same rest of the sentence.
	Contexts []string
	// Correct lists the true choices of a ProbMass item.
	Correct []int
	// Ref is what a generation task's scorer checks the completion against,
	// of the task's own type (GSM8K's answer, a program's tests); nil for
	// log-likelihood tasks.
	Ref any
}

// contextOf returns the context choice k is scored after.
func (it *Item) contextOf(k int) string {
	if it.Contexts != nil {
		return it.Contexts[k]
	}
	return it.Context
}

// Task is a list of items scored one way.
type Task struct {
	Name   string
	Source string // the file it came from
	Kind   Kind
	// Delimiter goes between context and continuation (the harness's
	// target_delimiter, " ").
	Delimiter string
	// Norm reports acc_norm as well as acc (multiple choice).
	Norm  bool
	Items []Item
	// Gen holds a Generation task's settings and scorer; nil otherwise.
	Gen *GenSpec
}

// Metric is one aggregate score with its standard error.
type Metric struct {
	Name   string  `json:"name"` // "acc", "acc_norm", "perplexity"
	Value  float64 `json:"value"`
	Stderr float64 `json:"stderr"` // 0 with fewer than two items
}

// TaskResult is the outcome of one task on one model.
type TaskResult struct {
	Task    string   `json:"task"`
	Source  string   `json:"source,omitempty"`
	Kind    string   `json:"kind"`
	Items   int      `json:"items"`
	Metrics []Metric `json:"metrics"`
	// Chance is the expected acc of a uniform guess (multiple choice).
	Chance float64 `json:"chance,omitempty"`
	// Subtasks holds the same metrics per group (MMLU subject, quiz file)
	// when the task has more than one.
	Subtasks []TaskResult `json:"subtasks,omitempty"`
	// Scores has, per item and choice, the log-likelihood and whether the
	// choice is the greedy continuation.
	Scores [][]LogLik `json:"-"`
}

// Metric returns the named metric and whether it exists.
func (r *TaskResult) Metric(name string) (Metric, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// Scorer is a model under evaluation with its tokenizer.
type Scorer struct {
	LM  LM
	Tok Encoder
	// Prefix is put before every context: the model's BOS or end-of-text
	// token (ContextToken), so that a context is read as the start of a
	// document, as the model was trained.
	Prefix []int32
}

// NewScorer returns a Scorer for an engine model and its tokenizer.
func NewScorer(m *engine.Model, tok Encoder) (*Scorer, error) {
	if tv, mv := tok.VocabSize(), m.Arch().Vocab; tv > mv {
		return nil, &MismatchError{Msg: fmt.Sprintf("the tokenizer has %d tokens but the model's vocabulary has %d: use the tokenizer.json that belongs to the model", tv, mv)}
	}
	s := &Scorer{LM: &EngineLM{Model: m}, Tok: tok}
	if c, ok := ContextToken(m); ok {
		s.Prefix = []int32{c}
	}
	return s, nil
}

// TaskOptions configures Evaluate.
type TaskOptions struct {
	// Limit keeps the first Limit items of each group (0 = all), in file
	// order, as the harness's --limit does per task.
	Limit int
	// Progress receives the scored requests (stage "eval", unit "req"); nil
	// = none.
	Progress progress.Func
}

// Limit returns the task with the first n items of each group (n <= 0:
// the task itself).
func (t *Task) Limit(n int) *Task {
	if n <= 0 {
		return t
	}
	c := *t
	c.Items = nil
	seen := map[string]int{}
	for _, it := range t.Items {
		if seen[it.Group] < n {
			seen[it.Group]++
			c.Items = append(c.Items, it)
		}
	}
	return &c
}

// Requests tokenizes the task's items the way lm-evaluation-harness does:
// trailing whitespace of the context moves to the continuation, the
// continuation's tokens are those of context+continuation after the
// context's own tokens, and Prefix goes first. It returns the requests,
// item by item and choice by choice.
func (s *Scorer) Requests(t *Task) ([]Request, error) {
	var reqs []Request
	ctxCache := map[string][]int32{}
	for i, it := range t.Items {
		if len(it.Choices) == 0 || it.Gold < 0 || it.Gold >= len(it.Choices) {
			return nil, fmt.Errorf("eval: %s item %d: gold %d of %d choices", t.Name, i, it.Gold, len(it.Choices))
		}
		if it.Contexts != nil && len(it.Contexts) != len(it.Choices) {
			return nil, fmt.Errorf("eval: %s item %d: %d contexts for %d choices", t.Name, i, len(it.Contexts), len(it.Choices))
		}
		for k, ch := range it.Choices {
			c, cont := splitSpaces(it.contextOf(k), t.Delimiter+ch)
			ctxIDs, ok := ctxCache[c]
			if !ok {
				ids, err := s.Tok.Encode(c, false)
				if err != nil {
					return nil, fmt.Errorf("eval: %s item %d: %w", t.Name, i, err)
				}
				ctxIDs = append(append([]int32(nil), s.Prefix...), toInt32(ids)...)
				if len(ctxIDs) == 0 {
					return nil, fmt.Errorf("eval: %s item %d: empty context and the model has no BOS or end-of-text token to start it", t.Name, i)
				}
				ctxCache = map[string][]int32{c: ctxIDs} // items rarely share contexts beyond their own choices
			}
			whole, err := s.Tok.Encode(c+cont, false)
			if err != nil {
				return nil, fmt.Errorf("eval: %s item %d: %w", t.Name, i, err)
			}
			n := len(ctxIDs) - len(s.Prefix)
			if len(whole) <= n {
				return nil, fmt.Errorf("eval: %s item %d choice %d: the continuation %q adds no tokens to the context", t.Name, i, k, cont)
			}
			reqs = append(reqs, Request{Context: ctxIDs, Cont: toInt32(whole[n:])})
		}
	}
	return reqs, nil
}

// splitSpaces moves the context's trailing whitespace to the start of the
// continuation (the harness's _encode_pair).
func splitSpaces(ctx, cont string) (string, string) {
	trimmed := strings.TrimRightFunc(ctx, unicode.IsSpace)
	return trimmed, ctx[len(trimmed):] + cont
}

func toInt32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, v := range ids {
		out[i] = int32(v)
	}
	return out
}

// Evaluate scores the task (cut to o.Limit) with s.
func (s *Scorer) Evaluate(ctx context.Context, t *Task, o TaskOptions) (*TaskResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	t = t.Limit(o.Limit)
	if len(t.Items) == 0 {
		return nil, fmt.Errorf("eval: task %s has no items", t.Name)
	}
	if t.Kind == Generation {
		return s.evaluateGeneration(ctx, t, o)
	}
	reqs, err := s.Requests(t)
	if err != nil {
		return nil, err
	}
	lls, err := s.LM.LogLikelihood(ctx, reqs, o.Progress)
	if err != nil {
		return nil, fmt.Errorf("eval: %s: %w", t.Name, err)
	}
	scores := make([][]LogLik, len(t.Items))
	k := 0
	for i, it := range t.Items {
		scores[i] = lls[k : k+len(it.Choices)]
		k += len(it.Choices)
	}
	return Aggregate(t, scores), nil
}

// Aggregate computes a task's metrics from per-item, per-choice scores
// (scores[i][k] for item i, choice k), with subtasks per group.
func Aggregate(t *Task, scores [][]LogLik) *TaskResult {
	r := aggregate(t.Name, t, scores, nil)
	var groups []string
	idx := map[string][]int{}
	for i, it := range t.Items {
		if _, ok := idx[it.Group]; !ok {
			groups = append(groups, it.Group)
		}
		idx[it.Group] = append(idx[it.Group], i)
	}
	if len(groups) > 1 {
		for _, g := range groups {
			sub := aggregate(g, t, scores, idx[g])
			sub.Source, sub.Scores = "", nil
			r.Subtasks = append(r.Subtasks, *sub)
		}
	}
	return r
}

// aggregate scores the items sel of t (nil: all).
func aggregate(name string, t *Task, scores [][]LogLik, sel []int) *TaskResult {
	if sel == nil {
		sel = make([]int, len(t.Items))
		for i := range sel {
			sel[i] = i
		}
	}
	r := &TaskResult{Task: name, Source: t.Source, Kind: t.Kind.String(), Items: len(sel), Scores: scores}
	acc := make([]float64, len(sel))
	switch t.Kind {
	case Cloze:
		lls := make([]float64, len(sel))
		for j, i := range sel {
			lls[j] = scores[i][0].LogProb
			if scores[i][0].Greedy {
				acc[j] = 1
			}
		}
		r.Metrics = append(r.Metrics, meanMetric("acc", acc))
		ppl := func(x []float64) float64 { return math.Exp(-mean(x)) }
		r.Metrics = append(r.Metrics, Metric{Name: "perplexity", Value: ppl(lls), Stderr: bootstrapStderr(lls, ppl)})
	case ProbMass:
		for j, i := range sel {
			it := t.Items[i]
			acc[j] = trueMass(scores[i], it.Correct)
			r.Chance += float64(len(it.Correct)) / float64(len(it.Choices))
		}
		r.Chance /= float64(len(sel))
		r.Metrics = append(r.Metrics, meanMetric("acc", acc))
	default:
		norm := make([]float64, len(sel))
		for j, i := range sel {
			it := t.Items[i]
			best, bestNorm := argmaxBy(len(it.Choices), func(k int) float64 { return scores[i][k].LogProb }),
				argmaxBy(len(it.Choices), func(k int) float64 {
					return scores[i][k].LogProb / float64(max(1, utf8.RuneCountInString(it.Choices[k])))
				})
			if best == it.Gold {
				acc[j] = 1
			}
			if bestNorm == it.Gold {
				norm[j] = 1
			}
			r.Chance += 1 / float64(len(it.Choices))
		}
		r.Chance /= float64(len(sel))
		r.Metrics = append(r.Metrics, meanMetric("acc", acc))
		if t.Norm {
			r.Metrics = append(r.Metrics, meanMetric("acc_norm", norm))
		}
	}
	return r
}

// trueMass is the share of the choices' probability, exp(log-likelihood)
// normalised over all of them, that falls on the choices correct. The
// largest log-likelihood is subtracted first, which changes nothing but
// keeps long answers from underflowing to 0/0.
func trueMass(lls []LogLik, correct []int) float64 {
	top := math.Inf(-1)
	for _, l := range lls {
		top = max(top, l.LogProb)
	}
	var all, right float64
	for _, l := range lls {
		all += math.Exp(l.LogProb - top)
	}
	for _, k := range correct {
		right += math.Exp(lls[k].LogProb - top)
	}
	return right / all
}

// argmaxBy returns the first index of the largest f(k), k < n (the
// harness's np.argmax).
func argmaxBy(n int, f func(int) float64) int {
	best, bv := 0, math.Inf(-1)
	for k := range n {
		if v := f(k); v > bv {
			best, bv = k, v
		}
	}
	return best
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// meanMetric is the mean of x with the harness's mean_stderr: the sample
// standard deviation (n−1) over √n; for 0/1 scores, √(p(1−p)/(n−1)).
func meanMetric(name string, x []float64) Metric {
	m := Metric{Name: name, Value: mean(x)}
	if n := len(x); n > 1 {
		var ss float64
		for _, v := range x {
			ss += (v - m.Value) * (v - m.Value)
		}
		m.Stderr = math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
	}
	return m
}

// BootstrapResamples is the number of resamples behind a bootstrapped
// standard error (the harness defaults to 100,000; at 1,000 the estimate
// of the standard error is itself within a few per cent).
const BootstrapResamples = 1000

// bootstrapStderr is the standard deviation of f over resamples of x with
// replacement, with a fixed seed so that a result is reproducible.
func bootstrapStderr(x []float64, f func([]float64) float64) float64 {
	if len(x) < 2 {
		return 0
	}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]float64, len(x))
	vals := make([]float64, BootstrapResamples)
	for b := range vals {
		for i := range buf {
			buf[i] = x[r.IntN(len(x))]
		}
		vals[b] = f(buf)
	}
	mu := mean(vals)
	var ss float64
	for _, v := range vals {
		ss += (v - mu) * (v - mu)
	}
	return math.Sqrt(ss / float64(len(vals)-1))
}
