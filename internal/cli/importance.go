package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"

	"github.com/autocompress/autocompress/internal/output"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/importance"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/job"
)

func init() {
	Register(&Command{
		Name:  "importance",
		Usage: "--model DIR --data FILE... --out scores.safetensors [--seqs N] [--seq-len T] [--expert-scores-out F [--expert-kind reap|frequency]] [flags]",
		Short: "score hidden channels, heads, neurons and layers by activation importance",
		Long: `Runs the model over calibration text and records Minitron activation
importance (method.md §2): hidden channels from the input_layernorm and
post_attention_layernorm outputs (summed over norm sites), query heads from the
attention output before o_proj (L2 over head_dim; ranked within KV groups),
MLP neurons from act(gate)·up, and per layer the block influence
1 − cos(layer input, layer output) (a mean over every calibration token) and
the calibration-loss increase when the layer alone is skipped; the same two
scores for each layer's attention and MLP sub-block alone. Every channel,
head and neuron statistic is the mean |activation| over the tokens of a
sequence, then the L2 norm over sequences; no score depends on --batch.

Calibration data: UTF-8 text files (tokenized with the model's tokenizer.json,
documents separated by the end-of-text token) or token-id files (--ids, .ids
or the binary magic), packed into --seqs sequences of --seq-len tokens (the
first ones, deterministically; fewer if the data is short). --data
parent:validation (parent:test, parent:train-sample) is that part of the
embedded parent's text, each of its documents ended by the end-of-text
token; parent:train is read from the corpora under --assets.

The skip losses rerun only the layers after the skipped one, from each
layer's input cached by the calibration pass, and are scored on the first
quarter (at least 32 tokens) of as many sequences, spread evenly over the
set, as --passes allows (default 4 equivalent forward passes over all
sequences, whatever the depth; the summary says what was scored and what it
cost). --passes 0 scores every sequence in full (the exhaustive scores, about
1 + 1.5·layers passes); --skip-seqs N scores N sequences in full.

For a mixture-of-experts model (Mixtral, Qwen3-MoE), --expert-scores-out
also writes per-expert scores from the same calibration sequences, in the
expert-scores format prune --expert-scores reads: REAP's router-weighted
activation saliency (the mean over the tokens routed to an expert of its
gate weight × the L2 norm of its output; the default) or the routing
frequency (--expert-kind frequency).

The scores are written as safetensors with provenance in __metadata__ (model
hash, data hash, sequence length, token count, version). When --out already
holds scores for the same model and data they are reused without a new pass
(--force recomputes); scores of another model or data are replaced, and any
other file at --out only with --force.`,
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			model := fs.String("model", "", "model `directory` (HF checkpoint), or \"parent\" for the embedded parent")
			dataFiles := dataFlag(fs, "calibration text or token-id (or parent:SPLIT)")
			assets := fs.String("assets", ".", "module root holding testdata/ext (for --data parent:train)")
			out := fs.String("out", "", "output scores `file` (.safetensors)")
			tokPath := fs.String("tokenizer", "", "tokenizer.json (default: the model's)")
			ids := fs.Bool("ids", false, "the data files hold token ids")
			seqs := intArg(fs, "seqs", 64, 1, maxCount, "calibration sequences")
			seqLen := intArg(fs, "seq-len", 128, 1, maxTokens, "tokens per sequence")
			batch := intArg(fs, "batch", 8, 1, maxBatch, "sequences per forward pass")
			skipSeqs := intArg(fs, "skip-seqs", 0, 0, maxCount, "sequences (spread evenly) for the per-layer skip-loss passes (0: as --passes allows)")
			passes := floatArg(fs, "passes", 4, floatRange{min: 0, max: 1e9}, "budget in equivalent forward passes over all sequences: the skip losses are scored on as many sequences as it allows (0: every sequence, the exhaustive scores)")
			noSkip := fs.Bool("no-skip-loss", false, "do not measure the skip losses (saves up to three passes per layer)")
			noSub := fs.Bool("no-sub-block-skip-loss", false, "measure the layer skip loss but not the attention and MLP ones (saves two passes per layer)")
			force := fs.Bool("force", false, "recompute even if --out holds matching scores; replace a file at --out that is not scores")
			jsonOut := fs.Bool("json", false, "print a summary as JSON")
			allowLong := fs.Bool("allow-long-context", false, "allow --seq-len past the model's max_position_embeddings")
			stream := fs.Bool("stream-layers", false, "release each layer's weight pages after it has run, so a model larger than memory still runs (at disk speed)")
			expertOut := fs.String("expert-scores-out", "", "for an MoE model: also write per-expert scores to this `file` (.safetensors, the format of prune --expert-scores)")
			expertKind := fs.String("expert-kind", importance.ExpertREAP, "with --expert-scores-out: reap (router-weighted activation saliency) or frequency (routing frequency)")
			jf := addJobFlags(fs)
			return func(ctx context.Context, env *Env, args []string) error {
				data := append(*dataFiles, args...)
				if *expertOut == "" && flagGiven(fs, "expert-kind") {
					return Usagef("--expert-kind needs --expert-scores-out")
				}
				if *expertKind != importance.ExpertREAP && *expertKind != importance.ExpertFrequency {
					return Usagef("--expert-kind %q: want %s or %s", *expertKind, importance.ExpertREAP, importance.ExpertFrequency)
				}
				switch {
				case *model == "" || *out == "":
					return Usagef("--model and --out are required")
				case len(data) == 0:
					return Usagef("give calibration data with --data FILE")
				case *seqs < 1 || *seqLen < 1 || *batch < 1 || *skipSeqs < 0:
					return Usagef("--seqs, --seq-len and --batch must be positive")
				}
				budget := *passes
				switch {
				case flagGiven(fs, "skip-seqs") && flagGiven(fs, "passes") && *passes != 0:
					return Usagef("give --skip-seqs or --passes, not both")
				case flagGiven(fs, "skip-seqs"):
					budget = 0
				case budget != 0 && budget < 1:
					return Usagef("--passes %g: want 0 (every sequence) or at least 1 (the calibration pass itself)", budget)
				}
				if err := jf.check(*out + ".job"); err != nil {
					return err
				}
				if *expertOut != "" {
					if !jf.native() {
						return Usagef("--expert-scores-out is the native engine's")
					}
					if err := output.Check(*expertOut, *force); errors.As(err, new(*output.ExistsError)) {
						return err
					} else if err != nil {
						return Usagef("--expert-scores-out %s: %v", *expertOut, err)
					}
				}
				if !jf.native() {
					if *stream {
						return Usagef("--stream-layers is the native engine's: a PyTorch job holds its model on its devices")
					}
					dir, err := checkpointDir(*model)
					if err != nil {
						return err
					}
					ec := job.EmitConfig{Kind: job.Importance, Model: dir, Data: data, Assets: *assets, Rows: *seqs,
						Recipe: job.Recipe{SeqLen: *seqLen, Batch: *batch, SkipRows: *skipSeqs, SkipPasses: budget,
							NoSkipLoss: *noSkip, NoSubBlockSkipLoss: *noSub}, Force: *force}
					res, err := jf.run(ctx, env, ec, *out, *force, *jsonOut)
					if err != nil || res == nil || res.Ingested == nil || *jsonOut {
						return err
					}
					return importanceReport(env, res.Ingested.Scores, *out, false, false)
				}
				dir, err := engineCheckpoint("--model", *model)
				if err != nil {
					return err
				}
				m, err := engine.LoadWith(dir, engine.LoadOptions{Mapped: true, Stream: *stream})
				if err != nil {
					return err
				}
				defer m.Close()
				if *expertOut != "" && !m.Arch().HasMoE() {
					return Usagef("--expert-scores-out: --model %s has no mixture-of-experts layers", *model)
				}
				o := dataset.ForModel(m.Arch(), dir)
				o.SeqLen, o.MaxRows, o.IDs, o.Assets, o.TokenizerFile, o.AllowLong = *seqLen, *seqs, *ids, *assets, *tokPath, *allowLong
				packed, err := dataRows(ctx, data, o)
				if err != nil {
					return err
				}
				if packed.Available < *seqs {
					fmt.Fprintf(env.Stderr, "note: the data fills only %d of %d sequences of %d tokens\n", packed.Available, *seqs, *seqLen)
				}
				term := progress.NewTerminal(env.Stderr)
				s, reused, err := importance.Cached(ctx, m, dir, packed.Rows, *out, importance.Options{Batch: *batch, NoSkipLoss: *noSkip, NoSubBlockSkipLoss: *noSub,
					SkipRows: *skipSeqs, Passes: budget, Progress: term.Report}, *force)
				term.End()
				if err != nil {
					return err
				}
				if reused {
					fmt.Fprintf(env.Stderr, "reusing %s (same model and calibration data)\n", *out)
				}
				if *expertOut != "" {
					es, err := importance.RoutedExperts(ctx, m, packed.Rows, *batch, *expertKind)
					if err != nil {
						return err
					}
					es.ModelHash, es.DataHash = s.ModelHash, s.DataHash
					es.Source = "autocompress importance (native engine)"
					if err := es.Save(*expertOut); err != nil {
						return err
					}
					fmt.Fprintf(env.Stderr, "expert scores: %s → %s\n", es.Describe(), *expertOut)
				}
				return importanceReport(env, s, *out, reused, *jsonOut)
			}
		},
	})
}

// importanceJSON is the --json output of importance.
type importanceJSON struct {
	Out           string     `json:"out"`
	Reused        bool       `json:"reused"`
	ModelHash     string     `json:"model_hash"`
	DataHash      string     `json:"data_hash"`
	SeqLen        int        `json:"seq_len"`
	Sequences     int        `json:"sequences"`
	Tokens        int64      `json:"tokens"`
	BaseLoss      float64    `json:"base_loss"`
	SkipSequences int        `json:"skip_sequences"`
	SkipTokens    int        `json:"skip_tokens"`
	Passes        float64    `json:"equivalent_passes"`
	LayerBI       []float64  `json:"layer_bi"`
	LayerBIOrder  []int      `json:"layer_bi_order"`
	LayersLeast   []int      `json:"layers_least"`
	HiddenLeast   []int      `json:"hidden_least"`
	LayerSkipLoss []*float64 `json:"layer_skip_loss,omitempty"`
	AttnBI        []*float64 `json:"attn_bi,omitempty"`
	MLPBI         []*float64 `json:"mlp_bi,omitempty"`
	AttnSkipLoss  []*float64 `json:"attn_skip_loss,omitempty"`
	MLPSkipLoss   []*float64 `json:"mlp_skip_loss,omitempty"`
}

func importanceReport(env *Env, s *importance.Scores, path string, reused, asJSON bool) error {
	layerOrder := importance.Ranking(s.LayerBI)
	if asJSON {
		out := importanceJSON{
			Out: path, Reused: reused, ModelHash: s.ModelHash, DataHash: s.DataHash,
			SeqLen: s.SeqLen, Sequences: s.Sequences, Tokens: s.Tokens, BaseLoss: s.BaseLoss,
			SkipSequences: s.SkipSequences, SkipTokens: s.SkipTokens, Passes: s.Passes,
			LayerBI: s.LayerBI, LayerBIOrder: layerOrder,
			LayersLeast: importance.LeastImportant(s.LayerBI, len(s.LayerBI)),
			HiddenLeast: importance.LeastImportant(s.Hidden, 8),
		}
		// JSON has no NaN: a score that was not measured (or a sub-block
		// the layer lacks) is null.
		nullable := func(v []float64) []*float64 {
			if importanceAllNaN(v) {
				return nil
			}
			return importanceNullable(v)
		}
		out.LayerSkipLoss, out.AttnBI, out.MLPBI = nullable(s.LayerSkipLoss), nullable(s.AttnBI), nullable(s.MLPBI)
		out.AttnSkipLoss, out.MLPSkipLoss = nullable(s.AttnSkipLoss), nullable(s.MLPSkipLoss)
		return writeJSON(env.Stdout, out)
	}
	w := env.Stdout
	fmt.Fprintf(w, "importance of %d layers over %d sequences × %d tokens (base loss %.4f) → %s\n", len(s.LayerBI), s.Sequences, s.SeqLen, s.BaseLoss, path)
	if !importanceAllNaN(s.LayerSkipLoss) {
		fmt.Fprintf(w, "skip losses on %d of %d sequences × %d of %d tokens", s.SkipSequences, s.Sequences, s.SkipTokens, s.SeqLen)
		if s.Passes > 0 {
			fmt.Fprintf(w, "; cost %.2f equivalent forward passes", s.Passes)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "                 layer            attention               MLP\n")
	fmt.Fprintf(w, "layer  block-influence  skip-loss  influence  skip-loss  influence  skip-loss\n")
	for l := range s.LayerBI {
		fmt.Fprintf(w, "%5d  %15.4f  %9.4f  %9.4f  %9.4f  %9.4f  %9.4f\n", l, s.LayerBI[l], s.LayerSkipLoss[l],
			importanceAt(s.AttnBI, l), importanceAt(s.AttnSkipLoss, l), importanceAt(s.MLPBI, l), importanceAt(s.MLPSkipLoss, l))
	}
	fmt.Fprintf(w, "least important layers first (block influence): %v\n", importance.LeastImportant(s.LayerBI, 3))
	if !importanceAllNaN(s.LayerSkipLoss) {
		fmt.Fprintf(w, "least important layers first (skip loss): %v\n", importance.LeastImportant(s.LayerSkipLoss, 3))
	}
	if !importanceAllNaN(s.AttnSkipLoss) {
		fmt.Fprintf(w, "least important attention sub-blocks first (skip loss): %v\n", importance.LeastImportant(s.AttnSkipLoss, 3))
		fmt.Fprintf(w, "least important MLP sub-blocks first (skip loss): %v\n", importance.LeastImportant(s.MLPSkipLoss, 3))
	}
	fmt.Fprintf(w, "least important hidden channels first: %v\n", importance.LeastImportant(s.Hidden, 8))
	return nil
}

// importanceAt returns v[l], NaN when v is too short (scores of an older
// file).
func importanceAt(v []float64, l int) float64 {
	if l < len(v) {
		return v[l]
	}
	return math.NaN()
}

// importanceNullable turns NaN entries into JSON nulls.
func importanceNullable(v []float64) []*float64 {
	out := make([]*float64, len(v))
	for i := range v {
		if !math.IsNaN(v[i]) {
			out[i] = &v[i]
		}
	}
	return out
}

func importanceAllNaN(v []float64) bool {
	for _, x := range v {
		if x == x {
			return false
		}
	}
	return true
}
