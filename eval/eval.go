// Package eval measures language-model quality: perplexity and bits per
// byte on held-out text, and log-likelihood tasks (LAMBADA, HellaSwag,
// PIQA, MMLU 5-shot, ARC-Challenge and ARC-Easy, Winogrande, TruthfulQA
// MC1 and MC2, the bsdgames quiz files, an in-domain suite cut from the
// user's own text) scored with lm-evaluation-harness's conventions;
// generation-scored tasks (GSM8K, HumanEval, MBPP, IFEval); named suites
// of tests averaged as a
// paper reports them (avg8); and the hand-off to lm-evaluation-harness
// itself for models too large for the native engine (HarnessScript,
// ImportHarness).
//
// # Windows
//
// A text is tokenized, prefixed with one context token (the model's BOS, or
// its end-of-text token when it has no BOS, so that the first real token is
// predicted too) and scored in windows of SeqLen tokens. With Stride 0 the
// windows are packed: consecutive, non-overlapping except for the one token
// that carries over, so every token is predicted exactly once, with between
// 1 and SeqLen tokens of context (the mean is about SeqLen/2). With
// 0 < Stride < SeqLen the windows slide: each window after the first
// advances by Stride tokens and scores only its last Stride tokens, which
// gives every token at least SeqLen−Stride tokens of context at
// SeqLen/Stride times the cost.
//
// # Metrics
//
// Perplexity is exp(mean negative log-likelihood per predicted token).
// Bits per byte is the total negative log-likelihood in bits divided by the
// UTF-8 bytes of the text, which makes models with different tokenizers
// comparable. Pre-tokenized ids have no bytes: only perplexity is reported.
//
// # Tasks
//
// A Task is a list of Items (a context, choices, the right one) read from
// a file the user points to (LoadTask; nothing is downloaded). Each choice
// is a Request for the log-likelihood of the continuation after the
// context, tokenized as the harness does (the context's trailing space
// moves to the continuation; the continuation's tokens are those of
// context+continuation after the context's own) and prefixed with the
// model's BOS or end-of-text token. A multiple-choice item is right under
// acc when its gold choice has the highest log-likelihood, and under
// acc_norm when it has the highest log-likelihood per character; a cloze
// item (LAMBADA) is right when greedy decoding produces its word, and its
// perplexity is exp(−mean log-likelihood of the word). Accuracies carry the
// harness's standard error √(p(1−p)/(n−1)); perplexities a bootstrap one.
// Items are in file order and --limit keeps the first N (per MMLU subject
// and quiz file), so a quick run is a fixed sample.
//
// # Generation
//
// A Generation task (GSM8K, HumanEval, MBPP, IFEval) is answered by greedy
// generation from each item's context and scored by the task's own scorer
// (GenSpec), with lm-evaluation-harness's prompts, stop sequences and
// metrics (each task's file names the harness task it follows).
// EngineLM.Generate runs the prompts with continuous batching on the KV
// cache (engine.Serve's scheduler over Model.Step, many sequences per
// step, a shared few-shot prefix run once), until a stop sequence, EOS or
// the token limit (256 new tokens, the harness's default); a prompt too
// long for the window less that limit is cut from the left, as the harness
// does. The code tasks run each completion with its tests in
// internal/sandbox; a program that fails in any way scores 0, and pass@1
// is the share that pass. IFEval's responses (up to 1280 tokens, no stop
// sequence) are scored by its instruction checkers (ifeval.go).
//
// EngineLM scores requests on the native engine: choices sharing a
// context run it once on the KV cache and continue from copies of it, and
// many questions go through one engine step.
//
// Winogrande gives each choice its own context (Item.Contexts: the
// sentence up to the blank, filled with each option) and scores the same
// rest of the sentence; TruthfulQA MC2 is the ProbMass kind, the
// normalised probability of the true answers.
//
// # Suites
//
// A Suite (Suites: avg8) is a list of tests, each a task, its file in the
// suite's directory and the metric averaged. LoadSuite loads what this
// build can score and names the rest unavailable, with the reason;
// Report.ScoreSuite puts each test's score per model side by side, marks
// the models within two standard errors of chance, and averages the tests
// measured.
//
// Run evaluates several models (a parent and its children) on the same
// text and tasks; Report prints one table, side by side, with the standard
// error next to every accuracy.
package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/autocompress/autocompress/corpus"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/progress"
)

// Options configures Score.
type Options struct {
	SeqLen int // window length in tokens (0: the default, 128)
	Stride int // 0 = packed windows; else sliding windows advancing by Stride
	Batch  int // windows per forward pass (0: the default, 8)
	// Progress receives the scored windows (stage "eval", unit "win"); nil =
	// none.
	Progress progress.Func
}

// Result is the outcome of scoring one token stream.
type Result struct {
	Tokens     int     // predicted tokens
	NLL        float64 // total negative log-likelihood, nats
	Perplexity float64
	// Bytes of text covered and bits per byte; 0 and NaN for ids.
	Bytes       int
	BitsPerByte float64
	SeqLen      int
	Stride      int
	Windows     int
}

// ErrEmpty is returned for a stream with nothing to predict.
var ErrEmpty = errors.New("eval: nothing to score (need at least two tokens)")

// window is one scored window: tokens [start, start+n) of the stream and the
// first position within it whose target counts.
type window struct{ start, n, from int }

func windows(n, T, stride int) []window {
	if stride <= 0 || stride >= T {
		stride = T
	}
	var out []window
	// Targets are stream[1:]; a window at start s covers inputs s..s+T-1 and
	// targets s+1..s+T.
	for s, scored := 0, 0; scored < n-1; {
		w := min(T, n-1-s)
		from := 0
		if s > 0 {
			from = max(0, scored-s)
		}
		out = append(out, window{s, w, from})
		scored = s + w
		if s+w >= n-1 {
			break
		}
		s += stride
	}
	return out
}

// Score runs m over the token stream ids (ids[0] is context only; every
// later token is predicted once) and returns perplexity. Bytes, when > 0,
// is the UTF-8 length of the text the predicted tokens came from, for bits
// per byte.
func Score(ctx context.Context, m *engine.Model, ids []int32, bytes int, o Options) (*Result, error) {
	if err := o.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	if len(ids) < 2 {
		return nil, ErrEmpty
	}
	vocab := m.Arch().Vocab
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return nil, &MismatchError{Msg: fmt.Sprintf("token id %d at position %d is outside the model's vocabulary of %d", id, i, vocab)}
		}
	}
	T := o.SeqLen
	ws := windows(len(ids), T, o.Stride)
	res := &Result{SeqLen: T, Stride: o.Stride, Windows: len(ws), Bytes: bytes, BitsPerByte: math.NaN()}
	task := progress.Start(o.Progress, progress.Event{Stage: "eval", Total: int64(len(ws)), Unit: "win"})
	// Windows of the same length are batched; the last may be shorter.
	for i := 0; i < len(ws); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		j := i
		for j < len(ws) && j-i < o.Batch && ws[j].n == ws[i].n {
			j++
		}
		n := ws[i].n
		in := make([]int32, 0, (j-i)*n)
		tg := make([]int32, 0, (j-i)*n)
		count := 0
		for _, w := range ws[i:j] {
			in = append(in, ids[w.start:w.start+n]...)
			for k := 0; k < n; k++ {
				if k < w.from {
					tg = append(tg, -1)
				} else {
					tg = append(tg, ids[w.start+k+1])
					count++
				}
			}
		}
		loss, err := m.ForwardLoss(in, tg, j-i, n)
		if err != nil {
			return nil, fmt.Errorf("eval: windows %d..%d: %w", i, j-1, err)
		}
		res.NLL += float64(loss) * float64(count)
		res.Tokens += count
		task.Add(int64(j - i))
		i = j
	}
	res.Perplexity = math.Exp(res.NLL / float64(res.Tokens))
	if bytes > 0 {
		res.BitsPerByte = res.NLL / math.Ln2 / float64(bytes)
	}
	return res, nil
}

// MismatchError reports a model and tokenizer (or ids) that do not belong
// together.
type MismatchError struct{ Msg string }

func (e *MismatchError) Error() string { return "eval: " + e.Msg }

// ContextToken returns the token that prefixes a text: BOS if the model has
// one, else its first EOS; ok is false when it has neither.
func ContextToken(m *engine.Model) (id int32, ok bool) {
	a := m.Arch()
	if a.BOS >= 0 && a.BOS < a.Vocab {
		return int32(a.BOS), true
	}
	if len(a.EOS) > 0 && a.EOS[0] >= 0 && a.EOS[0] < a.Vocab {
		return int32(a.EOS[0]), true
	}
	return 0, false
}

// Encoder is a tokenizer (tokenizer.Tokenizer satisfies it).
type Encoder interface {
	Encode(text string, addSpecial bool) ([]int, error)
	VocabSize() int
}

// contextEncoder is an Encoder that can be cancelled
// (tokenizer.Tokenizer is one).
type contextEncoder interface {
	EncodeContext(ctx context.Context, text string, addSpecial bool) ([]int, error)
}

func encode(ctx context.Context, tok Encoder, text string) ([]int, error) {
	if c, ok := tok.(contextEncoder); ok {
		return c.EncodeContext(ctx, text, false)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return tok.Encode(text, false)
}

// EmptyTextError reports text with nothing to score.
type EmptyTextError struct{ Name string }

func (e *EmptyTextError) Error() string {
	return "eval: " + e.Name + ": no text to score (empty or whitespace only)"
}

// Text scores raw UTF-8 text (name labels errors): it checks the encoding
// (an *corpus.EncodingError names the byte offset of the first invalid
// byte), tokenizes, prefixes ContextToken, and reports perplexity and bits
// per byte over all of the text's bytes. The text is scored as given (not
// cleaned).
func Text(ctx context.Context, m *engine.Model, tok Encoder, name string, text []byte, o Options) (*Result, error) {
	if err := corpus.CheckUTF8(name, text); err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(text))) == 0 {
		return nil, &EmptyTextError{Name: name}
	}
	if tv, mv := tok.VocabSize(), m.Arch().Vocab; tv > mv {
		return nil, &MismatchError{Msg: fmt.Sprintf("the tokenizer has %d tokens but the model's vocabulary has %d: use the tokenizer.json that belongs to the model", tv, mv)}
	}
	ids, err := encode(ctx, tok, string(text))
	if err != nil {
		return nil, fmt.Errorf("eval: %s: %w", name, err)
	}
	stream := make([]int32, 0, len(ids)+1)
	if c, ok := ContextToken(m); ok {
		stream = append(stream, c)
	}
	for _, id := range ids {
		stream = append(stream, int32(id))
	}
	return Score(ctx, m, stream, len(text), o)
}

// IDs scores pre-tokenized sequences: each sequence is scored as its own
// stream (its first id is context only). The results are pooled: Tokens
// and NLL add up, Perplexity is over all predicted tokens; no bits per byte.
func IDs(ctx context.Context, m *engine.Model, seqs [][]int, o Options) (*Result, error) {
	var total *Result
	for i, s := range seqs {
		if len(s) < 2 {
			continue
		}
		ids := make([]int32, len(s))
		for j, v := range s {
			if v < 0 || v > math.MaxInt32 {
				return nil, &MismatchError{Msg: fmt.Sprintf("sequence %d: id %d at position %d is not a token id", i, v, j)}
			}
			ids[j] = int32(v)
		}
		r, err := Score(ctx, m, ids, 0, o)
		if err != nil {
			return nil, fmt.Errorf("sequence %d: %w", i, err)
		}
		if total == nil {
			total = r
			continue
		}
		total.Tokens += r.Tokens
		total.NLL += r.NLL
		total.Windows += r.Windows
	}
	if total == nil {
		return nil, ErrEmpty
	}
	total.Perplexity = math.Exp(total.NLL / float64(total.Tokens))
	return total, nil
}
