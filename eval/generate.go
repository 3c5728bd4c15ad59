package eval

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
)

// DefaultMaxTokens is the most tokens a generation task generates when its
// GenSpec gives no limit: lm-evaluation-harness's max_gen_toks default
// (lm_eval/models/huggingface.py, HFLM.__init__, max_gen_toks=256).
const DefaultMaxTokens = 256

// GenSpec is how a Generation task generates and scores.
type GenSpec struct {
	// Until are the stop sequences (the harness's generation_kwargs.until):
	// generation stops once the completion contains one, and the
	// completion is cut before the first that occurs.
	Until []string
	// MaxTokens is the most new tokens per item (0: DefaultMaxTokens). On
	// the native engine, a model whose window (max_position_embeddings) is
	// not larger generates at most half its window, leaving the prompt the
	// other half (where the harness refuses the request).
	MaxTokens int
	// Score scores the completions, completions[i] answering items[i],
	// and returns the task's metrics. Only the context is cancelled: a
	// completion that cannot be scored (a program that crashes) scores as
	// wrong, it is not an error.
	Score func(ctx context.Context, items []Item, completions []string) ([]Metric, error)
}

// GenRequest asks for a greedy continuation of Prompt (token ids, at least
// one) of at most MaxTokens tokens, stopped early by any of Until.
type GenRequest struct {
	Prompt    []int32
	MaxTokens int
	Until     []string
}

// Why a generation ended.
const (
	StopSequence = "stop"   // the completion reached one of Until
	StopEOS      = "eos"    // the model produced an end-of-text token
	StopLength   = "length" // MaxTokens tokens were generated
)

// Completion answers a GenRequest.
type Completion struct {
	// Text is the decoded completion, cut before the first stop sequence.
	Text string
	// Tokens is the number of tokens generated (the EOS token excluded).
	Tokens int
	// Reason is StopSequence, StopEOS or StopLength.
	Reason string
	// PromptCut is the number of tokens cut from the left of the prompt to
	// fit the model's window (0 when it fitted).
	PromptCut int
}

// GenOptions configure a Generator.
type GenOptions struct {
	// Decode turns generated ids into text (required; stop sequences are
	// checked on the text).
	Decode func(ids []int32) (string, error)
	// EOS are the ids that end a completion; nil: the model's EOS ids.
	// An empty non-nil list never stops at EOS (benchmarks).
	EOS []int32
	// Batch is the most sequences in flight (0: 32).
	Batch int
	// PrefillTokens is the most prompt tokens fed per engine step across
	// sequences (chunked prefill; 0: 512, as bench-serve).
	PrefillTokens int
	// Progress receives the finished requests (stage "eval", unit "req").
	Progress progress.Func
}

// EnsureDefaults fills the unset (zero) fields and returns o: 32
// sequences, 512 prompt tokens per step.
func (o *GenOptions) EnsureDefaults() *GenOptions {
	if o.Batch == 0 {
		o.Batch = 32
	}
	if o.PrefillTokens == 0 {
		o.PrefillTokens = 512
	}
	return o
}

// Validate reports the first invalid option (after EnsureDefaults).
func (o *GenOptions) Validate() error {
	switch {
	case o.Decode == nil:
		return errors.New("eval: generation needs a decoder to check stop sequences")
	case o.Batch < 1:
		return fmt.Errorf("eval: generation batch %d: want at least 1 sequence in flight", o.Batch)
	case o.PrefillTokens < 1:
		return fmt.Errorf("eval: %d prompt tokens per step: want at least 1", o.PrefillTokens)
	}
	return nil
}

// Generator produces greedy completions. EngineLM is one.
type Generator interface {
	Generate(ctx context.Context, reqs []GenRequest, o GenOptions) ([]Completion, error)
}

// Decoder is a tokenizer that turns ids back into text
// (tokenizer.Tokenizer is one).
type Decoder interface {
	Decode(ids []int, skipSpecial bool) (string, error)
}

// ContextError reports a request that cannot fit the model's window even
// with its prompt cut from the left.
type ContextError struct {
	Request, MaxTokens, MaxPositions int
}

func (e *ContextError) Error() string {
	return fmt.Sprintf("eval: generation request %d: %d new tokens leave no room for a prompt in the model's %d positions; ask for fewer new tokens", e.Request, e.MaxTokens, e.MaxPositions)
}

// genSeq is one request in flight.
type genSeq struct {
	req    int
	prompt []int32
	cache  *engine.Cache
	fed    int // prompt tokens in the cache
	out    []int32
}

// Generate implements Generator on the native engine with continuous
// batching, the scheduler of engine.Serve (bench-serve) with stop
// conditions: every engine step (Model.Step) advances all sequences in
// flight, each decoding one token or feeding a chunk of its prompt, and a
// finished sequence's slot goes to the next request at once. Tokens are
// chosen greedily (the first of equal logits).
//
// A prompt longer than the model's window less MaxTokens is cut from the
// left to that length, as lm-evaluation-harness does
// (lm_eval/models/huggingface.py, HFLM.generate_until: max_ctx_len =
// self.max_length - max_gen_toks, then tok_batch_encode with
// left_truncate_len=max_ctx_len), and Completion.PromptCut says by how
// much; MaxTokens not below the window is a *ContextError (the harness's
// newer versions assert max_ctx_len > 0 there). When
// all prompts begin with the same tokens (a few-shot prompt), that prefix
// runs once and its KV cache is copied into each sequence.
func (e *EngineLM) Generate(ctx context.Context, reqs []GenRequest, o GenOptions) ([]Completion, error) {
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	m := e.Model
	a := m.Arch()
	batch, budget := o.Batch, o.PrefillTokens
	eos := o.EOS
	if eos == nil {
		for _, id := range a.EOS {
			eos = append(eos, int32(id))
		}
	}
	isEOS := map[int32]bool{}
	for _, id := range eos {
		isEOS[id] = true
	}
	out := make([]Completion, len(reqs))
	prompts := make([][]int32, len(reqs))
	for i, r := range reqs {
		if len(r.Prompt) == 0 || r.MaxTokens <= 0 {
			return nil, fmt.Errorf("eval: generation request %d has %d prompt tokens and asks for %d new tokens (want at least 1 of each)", i, len(r.Prompt), r.MaxTokens)
		}
		for _, t := range r.Prompt {
			if t < 0 || int(t) >= a.Vocab {
				return nil, fmt.Errorf("eval: generation request %d: token id %d outside the model's vocabulary of %d", i, t, a.Vocab)
			}
		}
		p := r.Prompt
		if w := a.MaxPositions; w > 0 {
			if r.MaxTokens >= w {
				return nil, &ContextError{Request: i, MaxTokens: r.MaxTokens, MaxPositions: w}
			}
			if keep := w - r.MaxTokens; len(p) > keep {
				out[i].PromptCut = len(p) - keep
				p = p[len(p)-keep:]
			}
		}
		prompts[i] = p
	}
	if len(reqs) == 0 {
		return out, nil
	}
	// The prefix all prompts share, leaving each at least one token to feed.
	share := len(prompts[0]) - 1
	for _, p := range prompts[1:] {
		share = min(share, commonPrefix(prompts[0], p), len(p)-1)
	}
	var base *engine.Cache
	if len(prompts) > 1 && share >= minShare {
		base = m.NewCache(share)
		if _, err := m.Step([]*engine.Cache{base}, [][]int32{prompts[0][:share]}, false); err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
	} else {
		share = 0
	}
	var free []*engine.Cache
	getCache := func(capacity int) *engine.Cache {
		for k, c := range free {
			if c.Cap() >= capacity {
				free[k] = free[len(free)-1]
				free = free[:len(free)-1]
				c.Reset()
				return c
			}
		}
		return m.NewCache(capacity)
	}
	task := progress.Start(o.Progress, progress.Event{Stage: "eval", Total: int64(len(reqs)), Unit: "req"})
	var active, seqs []*genSeq
	var caches []*engine.Cache
	var toks [][]int32
	next, done := 0, 0
	for done < len(reqs) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for next < len(reqs) && len(active) < batch {
			s := &genSeq{req: next, prompt: prompts[next], cache: getCache(len(prompts[next]) + reqs[next].MaxTokens)}
			if base != nil {
				if err := s.cache.CopyFrom(base); err != nil {
					return nil, fmt.Errorf("eval: %w", err)
				}
				s.fed = share
			}
			active = append(active, s)
			next++
		}
		// Decoders first, then prompt chunks within the budget.
		seqs, caches, toks = seqs[:0], caches[:0], toks[:0]
		for _, s := range active {
			if s.fed == len(s.prompt) {
				seqs, caches, toks = append(seqs, s), append(caches, s.cache), append(toks, s.out[len(s.out)-1:])
			}
		}
		left := budget
		for _, s := range active {
			if s.fed < len(s.prompt) && left > 0 {
				n := min(left, len(s.prompt)-s.fed)
				left -= n
				seqs, caches, toks = append(seqs, s), append(caches, s.cache), append(toks, s.prompt[s.fed:s.fed+n])
			}
		}
		logits, err := m.Step(caches, toks, false)
		if err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
		for j, s := range seqs {
			if s.fed < len(s.prompt) {
				s.fed += len(toks[j])
				if s.fed < len(s.prompt) {
					continue
				}
			}
			id := engine.Argmax(logits[j])
			r := reqs[s.req]
			g := &out[s.req]
			switch {
			case isEOS[id]:
				g.Reason = StopEOS
			default:
				s.out = append(s.out, id)
				if tailHasStop(s.out, r.Until, o.Decode) {
					g.Reason = StopSequence
				} else if len(s.out) >= r.MaxTokens {
					g.Reason = StopLength
				}
			}
		}
		// Retire the finished sequences.
		kept := active[:0]
		for _, s := range active {
			g := &out[s.req]
			if g.Reason == "" {
				kept = append(kept, s)
				continue
			}
			text, err := o.Decode(s.out)
			if err != nil {
				return nil, fmt.Errorf("eval: generation request %d: %w", s.req, err)
			}
			g.Text, g.Tokens = cutAtStop(text, reqs[s.req].Until), len(s.out)
			free = append(free, s.cache)
			s.cache = nil
			done++
		}
		active = kept
		task.Set(int64(done), "")
	}
	return out, nil
}

// tailHasStop tells whether the text of the last tokens of out contains a
// stop sequence. A stop sequence of L bytes that the newest token completes
// lies within the last L tokens (every token decodes to at least one
// byte), so decoding a few more than the longest is enough and keeps each
// check short. A tail that does not decode (it may start inside a
// character) holds no stop yet; the whole completion is decoded, and its
// errors reported, when it ends.
func tailHasStop(out []int32, until []string, decode func([]int32) (string, error)) bool {
	longest := 0
	for _, s := range until {
		longest = max(longest, len(s))
	}
	if longest == 0 {
		return false
	}
	text, err := decode(out[max(0, len(out)-longest-8):])
	if err != nil {
		return false
	}
	for _, s := range until {
		if s != "" && strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// cutAtStop returns text before the first occurrence of any stop sequence
// (the harness's `for term in until: s = s.split(term)[0]`).
func cutAtStop(text string, until []string) string {
	for _, s := range until {
		if s == "" {
			continue
		}
		if i := strings.Index(text, s); i >= 0 {
			text = text[:i]
		}
	}
	return text
}

// evaluateGeneration scores a Generation task: every item's context is
// tokenized (after Prefix), completed greedily by s.LM (a Generator) and
// the completions scored by t.Gen.Score.
func (s *Scorer) evaluateGeneration(ctx context.Context, t *Task, o TaskOptions) (*TaskResult, error) {
	if t.Gen == nil || t.Gen.Score == nil {
		return nil, fmt.Errorf("eval: %s: a generation task without a scorer", t.Name)
	}
	gen, ok := s.LM.(Generator)
	if !ok {
		return nil, fmt.Errorf("eval: %s: this model cannot generate (a generation task needs the native engine)", t.Name)
	}
	dec, ok := s.Tok.(Decoder)
	if !ok {
		return nil, fmt.Errorf("eval: %s: the tokenizer cannot decode ids to text, which a generation task needs", t.Name)
	}
	maxTok := t.Gen.MaxTokens
	if maxTok <= 0 {
		maxTok = DefaultMaxTokens
	}
	if e, ok := gen.(*EngineLM); ok {
		if w := e.Model.Arch().MaxPositions; w > 1 && maxTok >= w {
			maxTok = w / 2
		}
	}
	reqs := make([]GenRequest, len(t.Items))
	for i, it := range t.Items {
		ids, err := encode(ctx, s.Tok, it.Context)
		if err != nil {
			return nil, fmt.Errorf("eval: %s item %d: %w", t.Name, i, err)
		}
		p := append(append([]int32(nil), s.Prefix...), toInt32(ids)...)
		if len(p) == 0 {
			return nil, fmt.Errorf("eval: %s item %d: empty prompt and the model has no BOS or end-of-text token to start it", t.Name, i)
		}
		reqs[i] = GenRequest{Prompt: p, MaxTokens: maxTok, Until: t.Gen.Until}
	}
	decode := func(ids []int32) (string, error) {
		b := make([]int, len(ids))
		for i, v := range ids {
			b[i] = int(v)
		}
		return dec.Decode(b, true)
	}
	gens, err := gen.Generate(ctx, reqs, GenOptions{Decode: decode, Progress: o.Progress})
	if err != nil {
		return nil, fmt.Errorf("eval: %s: %w", t.Name, err)
	}
	texts := make([]string, len(gens))
	for i, g := range gens {
		texts[i] = g.Text
	}
	metrics, err := t.Gen.Score(ctx, t.Items, texts)
	if err != nil {
		return nil, fmt.Errorf("eval: %s: %w", t.Name, err)
	}
	return &TaskResult{Task: t.Name, Source: t.Source, Kind: t.Kind.String(), Items: len(t.Items), Metrics: metrics}, nil
}
