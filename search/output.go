package search

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/hardware"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/workload"
)

// Report is everything a finished search writes: the result and the
// context needed to explain it.
type Report struct {
	Model    string
	Space    *Space
	Result   *Result
	Scores   *importance.Scores // nil: structural prior
	Budgets  Budgets
	GPU      *hardware.GPU
	Workload *workload.Workload
	// Estimate holds the fixed deployment options (context, batched tokens).
	Estimate estimate.Options
	// Judged, when not nil, are the budgets the child is judged by where
	// they differ from Budgets, the limits the search ran under: after a
	// measured re-choice moved the limits, or for a budget relative to the
	// parent priced on its estimate. Why names the judged limit and the
	// searched one beside it.
	Judged *Budgets
}

// Files written into the output directory.
const (
	PlanFile    = "plan.json"
	ConfigFile  = "config.json"
	ServingFile = "serving.json"
	ParetoFile  = "pareto.csv"
	TopKFile    = "topk.csv"
	SummaryFile = "summary.txt"
	JSONFile    = "summary.json"
)

// Serving is the chosen deployment: engine settings and the command line
// that realises them.
type Serving struct {
	Engine      string   `json:"engine"`
	ServeOn     string   `json:"serve_on"`
	TP          int      `json:"tp"`
	MaxModelLen int      `json:"max_model_len"`
	Settings    Settings `json:"settings"`
	Command     string   `json:"command"`
	Notes       []string `json:"notes,omitempty"`
}

// Summary is the JSON summary (summary.json, and --json on stdout).
type Summary struct {
	Strategy string             `json:"strategy"`
	Model    string             `json:"model"`
	GPU      string             `json:"gpu"`
	Engine   string             `json:"engine"`
	Workload string             `json:"workload"`
	Budgets  map[string]float64 `json:"budgets"`
	// Margins are the allowances for the estimator's error the budgets
	// were met with (estimate × (1 + margin) within the limit).
	Margins      *Margins    `json:"margins,omitempty"`
	P90          bool        `json:"p90"`
	Proxy        string      `json:"proxy"`
	ParentMeets  bool        `json:"parent_meets_budgets"`
	Binding      string      `json:"binding_budget"`
	BindingUsage float64     `json:"binding_usage"`
	Shape        string      `json:"shape"`
	Chosen       Candidate   `json:"chosen"`
	Parent       Candidate   `json:"parent"`
	TopK         []Candidate `json:"top_k"`
	Serving      Serving     `json:"serving"`
	Evaluations  int64       `json:"evaluations"`
	GlobalShapes int         `json:"global_shapes"`
	Tokens       int64       `json:"selection_tokens"`
	Why          []string    `json:"why"`
	Notes        []string    `json:"notes"`
}

// Summarize builds the JSON summary of r.
func (r *Report) Summarize() Summary {
	res := r.Result
	sp := r.Space
	s := Summary{Strategy: res.Strategy, Model: r.Model, GPU: r.GPU.Name, Engine: string(sp.Engine), Workload: r.Workload.String(),
		Budgets: map[string]float64{}, Margins: r.Budgets.Margin, P90: r.Budgets.P90, ParentMeets: res.ParentMeets, Binding: res.Binding, BindingUsage: res.BindingUsage,
		Shape: sp.Describe(&res.Best), Chosen: res.Best, Parent: res.Parent, TopK: res.TopK, Serving: r.Serving(),
		Evaluations: res.Evaluations, GlobalShapes: res.GlobalShapes, Tokens: res.Tokens, Why: r.Why(), Notes: res.Notes}
	for _, n := range r.Budgets.Set() {
		_, lim := r.Budgets.value(n, &Costs{})
		s.Budgets[n] = lim
	}
	if len(res.Notes) > 0 {
		for _, n := range res.Notes {
			if strings.HasPrefix(n, "structural prior") || strings.HasPrefix(n, "importance scores") {
				s.Proxy = n
			}
		}
	}
	return s
}

// Serving returns the chosen engine settings and the serving command.
func (r *Report) Serving() Serving {
	sp, best := r.Space, &r.Result.Best
	maxLen := r.Estimate.MaxModelLen
	if maxLen <= 0 {
		maxLen = r.Workload.MaxContext()
	}
	sv := Serving{Engine: string(sp.Engine), ServeOn: sp.ServeOn.Name, TP: sp.TP, MaxModelLen: maxLen, Settings: best.Settings}
	deci := architecture.FormatFor(sp.Model(best)) == architecture.DeciLMFormat
	st := best.Settings
	prec := st.Precision
	if e, ok := sp.ServeOn.Engine(); ok {
		spec, _ := e.Spec()
		sv.Command = spec.Command(estimate.ServeArgs{MaxModelLen: maxLen, TP: sp.TP, MemFraction: st.MemFraction, MaxNumSeqs: st.MaxNumSeqs,
			KVDType: st.KVDType, Precision: prec, Concurrency: r.Workload.Concurrency, RemoteCode: deci})
	} else {
		sv.Command = fmt.Sprintf("(serve DIR with %s; priced as %s)", sp.ServeOn.Name, sp.Engine)
	}
	sv.Notes = append(sv.Notes, "DIR is the child checkpoint: autocompress prune --model PARENT --plan plan.json --out DIR")
	switch prec {
	case "nvfp4", "mxfp4", "int4-awq", "int4-gptq", "fp8-block":
		sv.Notes = append(sv.Notes, "precision "+prec+" is served from a checkpoint quantized to it (e.g. with ModelOpt or llm-compressor) after pruning")
	}
	if deci && sp.ServeOn.RemoteCode {
		sv.Notes = append(sv.Notes, "DeciLM: prune writes the configuration module (configuration_decilm.py, block_config.py) that --trust-remote-code loads")
	}
	return sv
}

func orStr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Why says in words what was cut and why it was the cheapest way to meet
// the binding budget.
func (r *Report) Why() []string {
	res, sp, b := r.Result, r.Space, &r.Budgets
	best := &res.Best
	if res.ParentMeets {
		limits := b.String()
		if r.Judged != nil && r.Judged.String() != limits {
			limits = r.Judged.String() + "; searched under " + limits + ", the limits priced on this host's estimates"
		}
		return []string{"the parent already meets every budget (" + limits + "): nothing is cut"}
	}
	var out []string
	if res.Binding != "" {
		v, lim := b.value(res.Binding, &best.Costs)
		pv, _ := b.value(res.Binding, &res.Parent.Costs)
		pstr := b.Format(res.Binding, pv)
		if !res.Parent.Costs.Fits {
			pstr = "does not fit (" + res.Parent.Costs.FailTerm + ")"
		}
		used := fmt.Sprintf("%.0f %% of the limit", 100*res.BindingUsage)
		if m := b.Margin.Of(res.Binding); m > 0 {
			used = fmt.Sprintf("%.0f %% of the limit with the %.1f %% margin for the estimator's error, %.0f %% without", 100*res.BindingUsage, 100*m, 100*res.BindingUsage/(1+m))
		}
		limit := b.Format(res.Binding, lim)
		if r.Judged != nil {
			if _, jl := r.Judged.value(res.Binding, &best.Costs); jl != lim && jl > 0 {
				limit = fmt.Sprintf("%s (searched under %s: the limit priced on this host's estimates)", r.Judged.Format(res.Binding, jl), limit)
			}
		}
		out = append(out, fmt.Sprintf("binding budget: --%s %s; the parent %s, the child %s (%s)",
			res.Binding, limit, pstr, b.Format(res.Binding, v), used))
	}
	pp, cp := componentParams(sp.Parent), componentParams(sp.Model(best))
	var cuts []string
	for _, k := range []string{"embedding and head", "attention", "MLP", "Mamba", "MoE"} {
		if d := pp[k] - cp[k]; d > 0 && pp[k] > 0 {
			cuts = append(cuts, fmt.Sprintf("%s −%s (%.0f %%)", k, FormatCount(d), 100*d/pp[k]))
		}
	}
	if len(cuts) > 0 {
		out = append(out, "cut: "+sp.Describe(best)+"; parameters: "+strings.Join(cuts, ", "))
	}
	if best.Costs.KVCapacityTokens > 0 && res.Parent.Costs.Fits && res.Parent.Costs.KVCapacityTokens > 0 {
		out = append(out, fmt.Sprintf("KV capacity %s → %s tokens", fmtTok(res.Parent.Costs.KVCapacityTokens), fmtTok(best.Costs.KVCapacityTokens)))
	}
	out = append(out, fmt.Sprintf("why: of the %d candidates the estimator priced, none that keeps more of the proxy (%.3f of the parent) meets every budget; each cut was kept where it lost the least proxy per unit of cost (bytes streamed and held, FLOPs) and the true cost was checked by the estimator for every move", res.Evaluations, best.Quality))
	if len(res.TopK) > 1 {
		n := &res.TopK[1]
		out = append(out, fmt.Sprintf("runner-up: %s, proxy %.3f", sp.Describe(n), n.Quality))
	}
	return out
}

func fmtTok(t float64) string {
	if math.IsInf(t, 1) {
		return "∞"
	}
	return strconv.FormatFloat(math.Round(t), 'f', 0, 64)
}

// componentParams counts a model's parameters by component.
func componentParams(m *architecture.Model) map[string]float64 {
	out := map[string]float64{}
	h := float64(m.Hidden)
	emb := float64(m.Vocab) * h
	if !m.TiedEmbeddings {
		emb *= 2
	}
	out["embedding and head"] = emb
	for _, l := range m.Layers {
		if a := l.Attention; a != nil {
			out["attention"] += h * float64(2*a.Heads+2*a.KVHeads) * float64(a.HeadDim)
		}
		if x := l.MLP; x != nil {
			k := 2.0
			if x.Gated {
				k = 3
			}
			out["MLP"] += k * h * float64(x.Width)
		}
		if x := l.Mamba; x != nil {
			di := float64(x.DInner())
			out["Mamba"] += h*(2*di+2*float64(x.Groups*x.StateSize)+float64(x.Heads)) + di*h
		}
		if x := l.MoE; x != nil {
			in := h // LatentMoE experts run at the latent width
			if x.LatentSize > 0 {
				in = float64(x.LatentSize)
			}
			out["MoE"] += float64(x.Experts)*3*in*float64(x.ExpertWidth) + 3*h*float64(x.SharedWidth)
		}
	}
	return out
}

// Write writes the outputs into dir atomically (built in a temporary
// directory beside it, checked, renamed into place); an existing dir is
// refused unless force.
func (r *Report) Write(ctx context.Context, dir string, force bool) error {
	out, err := checkpoint.NewOutputDir(dir, force)
	if err != nil {
		return err
	}
	out.Watch(ctx)
	if err := r.writeInto(out.Path()); err != nil {
		_ = out.Abort()
		return err
	}
	if err := ctx.Err(); err != nil {
		_ = out.Abort()
		return err
	}
	return out.Commit()
}

func (r *Report) writeInto(dir string) error {
	sp, best := r.Space, &r.Result.Best
	plan, err := sp.Plan(best, r.Scores)
	if err != nil {
		return fmt.Errorf("search: the chosen plan: %w", err)
	}
	var pb bytes.Buffer
	if err := plan.Write(&pb); err != nil {
		return err
	}
	child := sp.Model(best)
	cfg, err := child.Config(architecture.ConfigOptions{})
	if err != nil {
		return fmt.Errorf("search: the child's config: %w", err)
	}
	// The config must read back to the same shape, and the engine load it.
	back, err := architecture.FromConfig(cfg)
	if err != nil {
		return fmt.Errorf("search: the child's config does not read back: %w", err)
	}
	if !sp.ServeOn.Loads(back, sp.TP) {
		return fmt.Errorf("search: %s would not load the child: %v", sp.ServeOn.Name, sp.ServeOn.Check(back, sp.TP).Violations)
	}
	sum := r.Summarize()
	sj, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return err
	}
	svj, err := json.MarshalIndent(sum.Serving, "", "  ")
	if err != nil {
		return err
	}
	var txt bytes.Buffer
	r.WriteText(&txt)
	var par, top bytes.Buffer
	if err := r.writeCSV(&par, r.Result.Pareto); err != nil {
		return err
	}
	if err := r.writeCSV(&top, r.Result.TopK); err != nil {
		return err
	}
	for name, data := range map[string][]byte{PlanFile: pb.Bytes(), ConfigFile: cfg, ServingFile: append(svj, '\n'),
		ParetoFile: par.Bytes(), TopKFile: top.Bytes(), SummaryFile: txt.Bytes(), JSONFile: append(sj, '\n')} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil { //output:inside
			return err
		}
	}
	return nil
}

// writeCSV writes candidates with their costs, one row each.
func (r *Report) writeCSV(w io.Writer, cs []Candidate) error {
	cw := csv.NewWriter(w)
	head := []string{"rank", "quality", "meets_budgets", "shape", "layers", "hidden", "heads", "params", "active_params", "memory_gib", "weights_gib",
		"kv_capacity_tokens", "ttft_ms", "tpot_ms", "e2e_ms", "ttft_p90_ms", "tpot_p90_ms", "e2e_p90_ms", "output_tok_s", "requests_s",
		"precision", "kv_dtype", "max_num_seqs", "mem_fraction", "measured_kl", "measured_loss"}
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(x float64, k int) string { return strconv.FormatFloat(x, 'f', k, 64) }
	for i := range cs {
		c := &cs[i]
		kept := 0
		for _, l := range c.Layers {
			if !l.Removed {
				kept++
			}
		}
		kl, loss := "", ""
		if c.Measured != nil {
			kl, loss = f(c.Measured.KL, 5), f(c.Measured.Loss, 5)
		}
		co := &c.Costs
		rec := []string{strconv.Itoa(i + 1), f(c.Quality, 5), strconv.FormatBool(c.Meets), r.Space.Describe(c), strconv.Itoa(kept),
			strconv.Itoa(c.Hidden), strconv.Itoa(c.Heads), f(co.Params, 0), f(co.ActiveParams, 0), f(co.MemoryBytes/(1<<30), 3),
			f(co.WeightsBytes/(1<<30), 3), fmtTok(co.KVCapacityTokens), f(co.TTFT*1e3, 2), f(co.TPOT*1e3, 3), f(co.E2E*1e3, 1),
			f(co.TTFTP90*1e3, 2), f(co.TPOTP90*1e3, 3), f(co.E2EP90*1e3, 1), f(co.OutputTokS, 1), f(co.RequestsPerS, 3),
			c.Settings.Precision, c.Settings.KVDType, strconv.Itoa(c.Settings.MaxNumSeqs), f(c.Settings.MemFraction, 3), kl, loss}
		if !co.Fits {
			for j := 12; j <= 19; j++ {
				rec[j] = ""
			}
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteText writes the human summary.
func (r *Report) WriteText(w io.Writer) {
	res, sp, b := r.Result, r.Space, &r.Budgets
	best := &res.Best
	fmt.Fprintf(w, "autocompress search (%s): %s on %s with %s, workload %s\n", res.Strategy, r.Model, r.GPU.Name, sp.Engine, r.Workload)
	fmt.Fprintf(w, "budgets: %s\n", b.String())
	if res.ParentMeets {
		fmt.Fprintf(w, "the parent already meets every budget: the answer is the parent\n")
	}
	fmt.Fprintf(w, "chosen: %s (proxy %.3f of the parent)\n", sp.Describe(best), best.Quality)
	if best.Measured != nil {
		fmt.Fprintf(w, "measured: KL to the parent %.4f nats/token, loss %.4f\n", best.Measured.KL, best.Measured.Loss)
	}
	fmt.Fprintf(w, "\n%-18s %14s %14s %14s\n", "", "parent", "chosen", "budget")
	row := func(name, unit string, pv, cv, lim float64, format func(float64) string) {
		ps := format(pv)
		if !res.Parent.Costs.Fits && unit != "params" {
			ps = "does not fit"
		}
		ls := ""
		if lim > 0 {
			ls = format(lim)
		}
		fmt.Fprintf(w, "%-18s %14s %14s %14s\n", name, ps, format(cv), ls)
	}
	pc, cc := &res.Parent.Costs, &best.Costs
	tt, tp, te := "TTFT", "TPOT", "E2E"
	pT, pP, pE, cT, cP, cE := pc.TTFT, pc.TPOT, pc.E2E, cc.TTFT, cc.TPOT, cc.E2E
	if b.P90 {
		tt, tp, te = "TTFT p90", "TPOT p90", "E2E p90"
		pT, pP, pE, cT, cP, cE = pc.TTFTP90, pc.TPOTP90, pc.E2EP90, cc.TTFTP90, cc.TPOTP90, cc.E2EP90
	}
	row("memory", "", pc.MemoryBytes, cc.MemoryBytes, b.MaxMemory, FormatBytes)
	row("  weights", "", pc.WeightsBytes, cc.WeightsBytes, 0, FormatBytes)
	row(tt, "", pT, cT, b.MaxTTFT, FormatSeconds)
	row(tp, "", pP, cP, b.MaxTPOT, FormatSeconds)
	row(te, "", pE, cE, b.MaxE2E, FormatSeconds)
	thr := b.MinThroughput.TokensPerS
	row("output tok/s", "", pc.OutputTokS, cc.OutputTokS, thr, func(x float64) string { return fmt.Sprintf("%.0f", x) })
	if b.MinThroughput.RequestsPerS > 0 {
		row("requests/s", "", pc.RequestsPerS, cc.RequestsPerS, b.MinThroughput.RequestsPerS, func(x float64) string { return fmt.Sprintf("%.2f", x) })
	}
	row("params", "params", pc.Params, cc.Params, b.MaxParams, FormatCount)
	if pc.ActiveParams != pc.Params || b.MaxActiveParams > 0 {
		row("active params", "params", pc.ActiveParams, cc.ActiveParams, b.MaxActiveParams, FormatCount)
	}
	fmt.Fprintln(w)
	for _, s := range r.Why() {
		fmt.Fprintf(w, "%s\n", s)
	}
	fmt.Fprintf(w, "\nper layer (parent → chosen):\n")
	for l, pl := range sp.Parent.Layers {
		ls := best.Layers[l]
		fmt.Fprintf(w, "  %3d  %s\n", l, layerText(&pl, ls, best.Heads))
	}
	sv := r.Serving()
	fmt.Fprintf(w, "\nsettings: precision %s, KV %s", orStr(sv.Settings.Precision, "default"), orStr(sv.Settings.KVDType, "auto"))
	if sv.Settings.MaxNumSeqs > 0 {
		fmt.Fprintf(w, ", sequences/slots %d", sv.Settings.MaxNumSeqs)
	}
	if sv.Settings.MemFraction > 0 {
		fmt.Fprintf(w, ", memory fraction %g", sv.Settings.MemFraction)
	}
	fmt.Fprintf(w, ", context %d\nserve: %s\n", sv.MaxModelLen, sv.Command)
	for _, n := range sv.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "\nsearch: %d estimator evaluations, %d global shapes × settings, %d calibration tokens spent choosing\n", res.Evaluations, res.GlobalShapes, res.Tokens)
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func layerText(pl *architecture.Layer, ls LayerShape, heads int) string {
	if ls.Removed {
		return "removed"
	}
	var parts []string
	if a := pl.Attention; a != nil {
		if ls.KVGroups == 0 {
			parts = append(parts, "attention removed")
		} else {
			parts = append(parts, fmt.Sprintf("attention %d×%d → %d×%d (KV groups × queries)", a.KVHeads, a.Heads/a.KVHeads, ls.KVGroups, heads/ls.KVGroups))
		}
	}
	if m := pl.MLP; m != nil {
		if ls.MLP == 0 {
			parts = append(parts, "MLP removed")
		} else {
			parts = append(parts, fmt.Sprintf("MLP %d → %d", m.Width, ls.MLP))
		}
	}
	if m := pl.Mamba; m != nil {
		parts = append(parts, fmt.Sprintf("Mamba heads %d → %d", m.Heads, ls.MambaHeads))
		if ls.MambaHeadDim > 0 && ls.MambaHeadDim != m.HeadDim {
			parts = append(parts, fmt.Sprintf("head_dim %d → %d", m.HeadDim, ls.MambaHeadDim))
		}
	}
	if x := pl.MoE; x != nil {
		if ls.Experts > 0 && ls.Experts != x.Experts {
			parts = append(parts, fmt.Sprintf("MoE experts %d → %d", x.Experts, ls.Experts))
		} else {
			parts = append(parts, fmt.Sprintf("MoE %d experts (all kept)", x.Experts))
		}
	}
	return strings.Join(parts, ", ")
}
