package eval

import (
	"context"
	"fmt"
	"math"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/engine/blas"
	"github.com/autocompress/autocompress/internal/progress"
)

// Request asks for the log-likelihood of the continuation Cont after the
// context Context (token ids; both at least one token).
type Request struct {
	Context []int32
	Cont    []int32
}

// LogLik answers a Request.
type LogLik struct {
	// LogProb is the sum over Cont's tokens of log p(token | all before),
	// in nats.
	LogProb float64
	// Greedy tells whether every token of Cont was the model's most likely
	// next token (greedy decoding would produce Cont).
	Greedy bool
}

// LM scores requests. Implementations keep the order of reqs in their
// answer and report progress (when not nil) as requests complete (stage
// "eval", unit "req").
type LM interface {
	LogLikelihood(ctx context.Context, reqs []Request, progress progress.Func) ([]LogLik, error)
}

// EngineLM scores requests on the native engine with its KV cache.
// Requests with identical contexts (the choices of one question) are
// grouped: the context is run once and its cache copied for each
// continuation, and a one-token continuation costs nothing beyond the
// context's last logits. Several groups run in one engine step, and when
// their contexts begin with the same tokens (a few-shot prompt) that
// prefix runs once and is copied too.
//
// A request longer than the model's max_position_embeddings is cut from the
// left of its context, as lm-evaluation-harness does, so that context and
// continuation together fill the model's window.
type EngineLM struct {
	Model *engine.Model
	// StepTokens bounds the tokens per engine step (default 2048).
	StepTokens int
}

// group is the requests sharing one context.
type group struct {
	ctx  []int32
	reqs []int // indices into the request list
}

// LogLikelihood implements LM.
func (e *EngineLM) LogLikelihood(ctx context.Context, reqs []Request, pf progress.Func) ([]LogLik, error) {
	m := e.Model
	a := m.Arch()
	maxLen := a.MaxPositions
	budget := e.StepTokens
	if budget <= 0 {
		budget = 2048
	}
	// Truncate and group by context, in order of first appearance.
	var groups []*group
	byCtx := map[string]*group{}
	for i, r := range reqs {
		if len(r.Context) == 0 || len(r.Cont) == 0 {
			return nil, fmt.Errorf("eval: request %d: empty context or continuation", i)
		}
		for _, t := range r.Cont {
			if t < 0 || int(t) >= a.Vocab {
				return nil, fmt.Errorf("eval: request %d: token id %d outside the model's vocabulary of %d", i, t, a.Vocab)
			}
		}
		c := r.Context
		if maxLen > 0 && len(c)+len(r.Cont)-1 > maxLen {
			keep := maxLen + 1 - len(r.Cont)
			if keep < 1 {
				return nil, fmt.Errorf("eval: request %d: a continuation of %d tokens does not fit the model's %d positions", i, len(r.Cont), maxLen)
			}
			c = c[len(c)-keep:]
		}
		key := idsKey(c)
		g := byCtx[key]
		if g == nil {
			g = &group{ctx: c}
			byCtx[key] = g
			groups = append(groups, g)
		}
		g.reqs = append(g.reqs, i)
	}
	out := make([]LogLik, len(reqs))
	done := 0
	task := progress.Start(pf, progress.Event{Stage: "eval", Total: int64(len(reqs)), Unit: "req"})
	for i := 0; i < len(groups); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A chunk of groups within the token budget (at least one group).
		// Contexts that begin alike (a few-shot prompt) share their common
		// prefix, which then counts once.
		j, share := i, 0
		var sumCtx, sumCont int
		for j < len(groups) {
			g := groups[j]
			s := len(g.ctx) - 1
			if j > i {
				s = min(share, commonPrefix(groups[i].ctx, g.ctx), len(g.ctx)-1)
			}
			ctxs, conts, k := sumCtx+len(g.ctx), sumCont+contTokens(g, reqs), j-i+1
			cost := ctxs + conts
			if s >= minShare && k > 1 {
				cost = s + ctxs - k*s + conts
			}
			if j > i && cost > budget {
				break
			}
			share, sumCtx, sumCont = s, ctxs, conts
			j++
		}
		if j-i < 2 || share < minShare {
			share = 0
		}
		if err := e.chunk(groups[i:j], share, reqs, out); err != nil {
			return nil, err
		}
		for _, g := range groups[i:j] {
			done += len(g.reqs)
		}
		task.Set(int64(done), "")
		i = j
	}
	return out, nil
}

// minShare is the shortest common context prefix worth running once for
// several questions.
const minShare = 16

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// contTokens is the number of continuation tokens a group puts through
// the model after its context.
func contTokens(g *group, reqs []Request) int {
	n := 0
	for _, r := range g.reqs {
		n += len(reqs[r].Cont) - 1
	}
	return n
}

// chunk scores the requests of groups: one step for the contexts (after
// one for their first share tokens, common to all, when share > 0), one
// for every continuation longer than a token, on copies of its context's
// cache.
func (e *EngineLM) chunk(groups []*group, share int, reqs []Request, out []LogLik) error {
	m := e.Model
	var base *engine.Cache
	if share > 0 {
		base = m.NewCache(share)
		if _, err := m.Step([]*engine.Cache{base}, [][]int32{groups[0].ctx[:share]}, false); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
	}
	caches := make([]*engine.Cache, len(groups))
	toks := make([][]int32, len(groups))
	for g, gr := range groups {
		caches[g] = m.NewCache(len(gr.ctx))
		toks[g] = gr.ctx
		if base != nil {
			if err := caches[g].CopyFrom(base); err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			toks[g] = gr.ctx[share:]
		}
	}
	last, err := m.Step(caches, toks, false)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	tmp := make([]float32, m.Arch().Vocab)
	var contCaches []*engine.Cache
	var contToks [][]int32
	var contReq []int
	for g, gr := range groups {
		row := last[g]
		lse := logSumExp64(tmp, row)
		best := engine.Argmax(row)
		for _, r := range gr.reqs {
			t := reqs[r].Cont[0]
			out[r] = LogLik{LogProb: float64(row[t]) - lse, Greedy: best == t}
			if len(reqs[r].Cont) > 1 {
				c := m.NewCache(len(gr.ctx) + len(reqs[r].Cont) - 1)
				if err := c.CopyFrom(caches[g]); err != nil {
					return fmt.Errorf("eval: %w", err)
				}
				contCaches = append(contCaches, c)
				contToks = append(contToks, reqs[r].Cont[:len(reqs[r].Cont)-1])
				contReq = append(contReq, r)
			}
		}
	}
	if len(contCaches) == 0 {
		return nil
	}
	logits, err := m.Step(contCaches, contToks, true)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	V := m.Arch().Vocab
	for k, r := range contReq {
		cont := reqs[r].Cont
		for p := 1; p < len(cont); p++ {
			row := logits[k][(p-1)*V : p*V]
			t := cont[p]
			out[r].LogProb += float64(row[t]) - logSumExp64(tmp, row)
			if engine.Argmax(row) != t {
				out[r].Greedy = false
			}
		}
	}
	return nil
}

// logSumExp64 returns log Σ exp(row), with the engine's vector kernels
// (tmp is scratch of at least len(row)).
func logSumExp64(tmp, row []float32) float64 {
	mx := blas.Max(row)
	tmp = tmp[:len(row)]
	copy(tmp, row)
	return float64(mx) + math.Log(float64(blas.ExpShiftSum(tmp, mx)))
}

func idsKey(ids []int32) string {
	b := make([]byte, 4*len(ids))
	for i, v := range ids {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return string(b)
}
