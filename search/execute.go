package search

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/proxy"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/workload"
)

// Request is one whole search as the search command and the pipeline give
// it: the parent, its scores, the deployment, the budgets and the strategy.
type Request struct {
	// Parent is the parent's architecture; Name names it in the outputs.
	Parent *architecture.Model
	Name   string
	// Dir is the parent's checkpoint directory ("" for a config or preset:
	// no measured proxy, no importance scores).
	Dir string
	// Scores are the parent's importance scores (nil: the structural
	// prior). Their model hash must be Dir's.
	Scores *importance.Scores
	// ExpertScores rank the routed experts of an MoE parent (REAP,
	// routing frequency, or the structural prior; nil: the structural
	// prior computed from Dir's weights, or, for a config, the plan keeps
	// the lowest-index experts and the notes say so). Their model hash,
	// when they have one, must be Dir's.
	ExpertScores *importance.ExpertScores

	GPU      *hardware.GPU
	Engine   estimate.Engine
	ServeOn  export.Capabilities // engine whose load rules the child meets
	Workload *workload.Workload
	Budgets  Budgets
	// Margin is the allowance for the estimator's error on each budgeted
	// cost (nil: DefaultMargins for the deployment; a zero Margins: none).
	// It replaces Budgets.Margin.
	Margin *Margins

	TP               int
	Precisions       []string // searched (nil: the engine's default)
	KVDTypes         []string // searched (nil: auto)
	MaxNumSeqs       int      // fixed (0: searched for llama.cpp, else the engine's)
	MemFraction      float64  // fixed (0: searched under a memory budget)
	MaxBatchedTokens int
	MaxModelLen      int // context limit (0: the workload's)
	// AllowLongContext lets the context run past the parent's
	// max_position_embeddings; without it a context past them is refused
	// by the one context rule (workload.FitContext), as every command
	// that prices or runs requests refuses it.
	AllowLongContext bool
	KeepLayers       []int

	Strategy string
	TopK     int
	// Rows are held-out rows (seq len + 1 ids) for the measured proxy (nil:
	// none).
	Rows [][]int32
	// TopKMeasurer, when set, builds the minitron strategy's measurer of
	// its top-k from the parent loaded for the measured proxy and the
	// held-out Rows: Minitron++'s brief distillation of each candidate
	// before choosing by held-out loss is search/trained's NewFactory. Nil:
	// the candidates are ranked by their loss untrained (KLMeasurer), and
	// the notes say so. It applies to the minitron strategy only; a
	// Measurer it builds that is an io.Closer is closed when the search
	// ends.
	TopKMeasurer MeasurerFactory
	// Progress receives the search's phases and the top-k candidates'
	// training (stage "search"); nil = none.
	Progress progress.Func
}

// A MeasurerFactory builds the Measurer of candidates pruned from parent,
// scored on the held-out rows (T+1 ids each); progress, when set, receives
// the measurer's own phases. The caller chooses the measurer
// (Request.TopKMeasurer), so the search does not depend on how it trains.
type MeasurerFactory func(ctx context.Context, parent *engine.Model, heldOut [][]int32, progress progress.Func) (Measurer, error)

// ErrScoresMismatch is returned (wrapped) when Request.Scores were computed
// for another model than Request.Dir.
var ErrScoresMismatch = errors.New("importance scores computed for another model")

// Execute builds the space, runs the strategy and returns the report that
// Report.Write writes. Errors that the request's values cause are
// *KeepLayersError, *ScoresError, ErrScoresMismatch (wrapped),
// *workload.ContextError (wrapped: a context past the parent's positions)
// and *InfeasibleError; the others are failures of the work.
func Execute(ctx context.Context, r Request) (*Report, error) {
	if r.Parent == nil || r.GPU == nil || r.Workload == nil {
		return nil, errors.New("search: a parent, a GPU and a workload are needed")
	}
	w, err := r.fitContext()
	if err != nil {
		return nil, err
	}
	r.Workload = w
	if r.Scores != nil {
		if r.Dir == "" {
			return nil, fmt.Errorf("search: %w: scores need the checkpoint directory they were computed on, not a config or preset", ErrScoresMismatch)
		}
		h, err := importance.HashModelDir(r.Dir)
		if err != nil {
			return nil, err
		}
		if r.Scores.ModelHash != h {
			return nil, fmt.Errorf("search: %w (model hash %.12s, %s has %.12s): score this model with autocompress importance", ErrScoresMismatch, r.Scores.ModelHash, r.Dir, h)
		}
	}
	if r.Margin == nil || r.Margin.Quantile > 0 {
		q := MarginQuantile
		if r.Margin != nil {
			q = r.Margin.Quantile
		}
		m, err := DefaultMarginsFor(r.GPU, r.Engine, r.Workload, r.Parent, q)
		if err != nil {
			return nil, err
		}
		r.Margin = m
	}
	r.Budgets.Margin = r.Margin
	so := SpaceOptions{Engine: r.Engine, ServeOn: r.ServeOn, TP: max(r.TP, 1), Precisions: r.Precisions, KVDTypes: r.KVDTypes,
		MaxNumSeqs: r.MaxNumSeqs, MemFraction: r.MemFraction, Concurrency: r.Workload.Concurrency,
		MaxMemory: r.Budgets.MaxMemory, DeviceBytes: float64(r.GPU.MemoryBytes), KeepLayers: r.KeepLayers, Uniform: r.Strategy == Minitron}
	sp, err := NewSpace(r.Parent, so)
	if err != nil {
		return nil, err
	}
	px, err := NewProxy(r.Parent, r.Scores)
	if err != nil {
		return nil, err
	}
	if len(sp.Experts) > 0 {
		if err := r.expertScores(ctx, sp, px); err != nil {
			return nil, err
		}
	}
	opt := Options{Strategy: r.Strategy, GPU: r.GPU, Workload: r.Workload, Budgets: r.Budgets, TopK: r.TopK,
		Estimate: estimate.Options{MaxModelLen: r.MaxModelLen, MaxBatchedTokens: r.MaxBatchedTokens},
		Plan:     func(c *Candidate) (*prune.Plan, error) { return sp.Plan(c, r.Scores) }, Progress: r.Progress}
	if len(r.Rows) > 0 {
		if r.Dir == "" {
			return nil, errors.New("search: the measured proxy needs a checkpoint with weights, not a config")
		}
		// Forward passes and the candidates' tensors only: the parent's
		// weights are read in place, in their checkpoint dtype.
		em, err := engine.LoadWith(r.Dir, engine.LoadOptions{Mapped: true})
		if err != nil {
			return nil, fmt.Errorf("search: measured proxy: %w", err)
		}
		defer em.Close()
		if r.Strategy == Minitron && r.TopKMeasurer != nil {
			tm, err := r.TopKMeasurer(ctx, em, r.Rows, r.Progress)
			if err != nil {
				return nil, err
			}
			if c, ok := tm.(io.Closer); ok {
				defer c.Close()
			}
			opt.Measurer = tm
		} else {
			meas, err := NewKLMeasurer(ctx, em, r.Rows, proxy.Options{})
			if err != nil {
				return nil, err
			}
			opt.Measurer = meas
		}
	} else if r.Strategy == Minitron && r.TopKMeasurer != nil {
		return nil, errors.New("search: measuring the top-k candidates needs held-out rows to score them on (Rows) and a checkpoint with weights")
	}
	res, err := Run(ctx, sp, px, opt)
	if err != nil {
		return nil, err
	}
	if ms := r.Margin.String(&r.Budgets); ms == "none" {
		res.Notes = append(res.Notes, "no margin for the estimator's error: the budgets may be filled to 100 % of the estimate, and a child can miss them when measured")
	} else {
		res.Notes = append(res.Notes, "margins for the estimator's error: "+ms+"; every budgeted estimate was kept within its limit less its margin")
	}
	name := r.Name
	if name == "" {
		name = r.Parent.Name
	}
	return &Report{Model: name, Space: sp, Result: res, Scores: r.Scores, Budgets: r.Budgets, GPU: r.GPU,
		Workload: r.Workload, Estimate: opt.Estimate}, nil
}

// ExpertScoresError is Request.ExpertScores that do not fit the parent.
type ExpertScoresError struct{ Err error }

func (e *ExpertScoresError) Error() string { return "search: expert scores: " + e.Err.Error() }

func (e *ExpertScoresError) Unwrap() error { return e.Err }

// expertScores sets the ranking of the routed experts the space's plans
// keep and the proxy counts: the request's, or the structural prior of
// the checkpoint's weights; a config has neither, and the notes say the
// plan then keeps the lowest-index experts.
func (r *Request) expertScores(ctx context.Context, sp *Space, px *Proxy) error {
	es := r.ExpertScores
	if es != nil && es.ModelHash != "" && r.Dir != "" {
		h, err := importance.HashModelDir(r.Dir)
		if err != nil {
			return err
		}
		if es.ModelHash != h {
			return &ExpertScoresError{Err: fmt.Errorf("computed for another model (model hash %.12s, %s has %.12s)", es.ModelHash, r.Dir, h)}
		}
	}
	if es == nil && r.Dir != "" {
		var err error
		if es, err = importance.StructuralExperts(ctx, r.Dir, r.Parent); err != nil {
			return fmt.Errorf("search: the experts' structural prior: %w", err)
		}
	}
	if es == nil {
		sp.Notes = append(sp.Notes, "experts: no expert scores and no weights (a config): the proxy uses the structural prior f^0.5 and the plan keeps the lowest-index experts; prune a checkpoint with expert scores (REAP or routing frequency from a file, or the structural prior of its weights)")
		return nil
	}
	if err := px.SetExpertScores(es); err != nil {
		if r.ExpertScores == nil {
			return fmt.Errorf("search: the experts' structural prior: %w", err)
		}
		return &ExpertScoresError{Err: err}
	}
	sp.ExpertScores = es
	return nil
}

// fitContext checks the request's context by the one context rule
// (workload.FitContext) against the parent's max_position_embeddings:
// MaxModelLen, when set, is the user's explicit limit; otherwise the
// workload's. It returns a copy of the workload with the resolved limit
// (a preset's limit capped at the parent's positions, as estimate prices
// it), leaving the caller's unchanged.
func (r *Request) fitContext() (*workload.Workload, error) {
	w := *r.Workload
	explicit := r.MaxModelLen > 0
	if explicit {
		w.ContextLimit = r.MaxModelLen
	}
	if _, err := w.FitContext(workload.ContextRule{MaxPositions: r.Parent.MaxPositions, Explicit: explicit, AllowLong: r.AllowLongContext}); err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	return &w, nil
}
