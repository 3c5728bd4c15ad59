package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/tokenizer"
)

// Scratch is a training run from random weights to a HuggingFace checkpoint:
// what "autocompress train" does. Options holds the optimiser, schedule,
// evaluation and checkpoint settings (Options.CheckpointPath is the
// checkpoint file; OnStep is kept and called after the step log's line;
// Progress receives the steps and the notes).
type Scratch struct {
	// Arch is the architecture to train; nil is ParentArch. Its vocabulary,
	// EOS and BOS are set from the tokenizer.
	Arch *architecture.Model
	// Train and Val are the documents (Val may be empty: no evaluation).
	Train, Val []dataset.Doc
	// Tokenizer is the byte-level BPE to use (needed for token-id
	// documents); nil trains one with Merges merges on Train's texts.
	Tokenizer *tokenizer.TrainedBPE
	Merges    int
	Seed      uint64 // initial weights and data order

	Out   string           // the model directory
	DType checkpoint.DType // saved weight dtype (default BF16)
	// Force replaces an existing Out and, without Resume, an existing
	// checkpoint and a LogPath that is not a step log.
	Force bool
	// Resume continues from Options.CheckpointPath.
	Resume bool
	// SavePartial saves the model also when Options.StopAt ends the run early.
	SavePartial bool
	// LogPath, when set, is the JSON-lines step log (OpenStepLog).
	LogPath string

	Options Options
}

// ScratchResult is what a Scratch run did.
type ScratchResult struct {
	Out         string  `json:"out"`
	Steps       int     `json:"steps"` // steps done in the whole run
	Params      int     `json:"params"`
	Vocab       int     `json:"vocab"`
	TrainTokens int     `json:"train_tokens"`
	TrainLoss   float64 `json:"train_loss"`
	ElapsedS    float64 `json:"elapsed_s"`
	// ValLoss and ValPPL are absent without validation documents.
	ValLoss *float64 `json:"val_loss,omitempty"`
	ValPPL  *float64 `json:"val_ppl,omitempty"`
	// Stopped is set when Options.StopAt ended the run before its last step
	// (continue with Resume); Saved tells whether the model was written.
	Stopped bool `json:"stopped,omitempty"`
	Saved   bool `json:"-"`
}

// FromScratch runs s: the tokenizer (given or trained), the documents
// packed into rows of Options.SeqLen+1 tokens with the end-of-text token
// between documents, a model of s.Arch with seeded random weights, the
// training run (resumed from the checkpoint with s.Resume), and the model
// saved to s.Out with its tokenizer, tokenizer_config.json and
// generation_config.json through one atomic output directory. An existing
// Out, or without Resume an existing checkpoint, is refused before any work
// unless s.Force. Cancelling ctx stops the run with a checkpoint.
func FromScratch(ctx context.Context, s Scratch) (*ScratchResult, error) {
	o := s.Options
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if s.Out == "" {
		return nil, errors.New("train: no output directory")
	}
	// Check can be written, not only free: the save comes after the training.
	if err := output.Check(s.Out, s.Force); err != nil {
		return nil, err
	}
	if !s.Resume && o.CheckpointPath != "" {
		if err := output.Check(o.CheckpointPath, s.Force); err != nil {
			return nil, fmt.Errorf("checkpoint (resume to continue from it): %w", err)
		}
	}
	if s.DType == "" {
		s.DType = checkpoint.BF16
	}
	note := func(format string, a ...any) { o.Progress.Notef("train", format, a...) }
	tok := s.Tokenizer
	if tok == nil {
		texts := make([]string, len(s.Train))
		for i, d := range s.Train {
			if d.IDs != nil {
				return nil, errors.New("train: token-id documents need the tokenizer they were made with")
			}
			texts[i] = d.Text
		}
		t0 := time.Now()
		var err error
		if tok, err = tokenizer.TrainBPE(ctx, texts, tokenizer.BPETrainOptions{Merges: s.Merges, Special: []string{EndOfText}, Progress: o.Progress}); err != nil {
			return nil, err
		}
		note("trained a byte-level BPE: %d tokens in %s", tok.VocabSize(), time.Since(t0).Round(time.Millisecond))
	}
	eot, ok := tok.Special[EndOfText]
	if !ok {
		return nil, fmt.Errorf("tokenizer has no %s token", EndOfText)
	}
	po := dataset.PackOptions{SeqLen: o.SeqLen, Sep: eot, Vocab: tok.VocabSize()}
	packed, err := dataset.Pack(ctx, s.Train, dataset.TrainedBPE(tok), po)
	if err != nil {
		return nil, err
	}
	var valRows [][]int32
	if len(s.Val) > 0 {
		vp, err := dataset.Pack(ctx, s.Val, dataset.TrainedBPE(tok), po)
		if err != nil {
			return nil, fmt.Errorf("validation data: %w", err)
		}
		valRows = vp.Rows
	}
	trainTokens := len(packed.Rows) * o.SeqLen
	if packed.Bytes > 0 {
		note("data: %d training rows (%d tokens, %.2f bytes/token), %d validation rows of %d tokens",
			len(packed.Rows), trainTokens, float64(packed.Bytes)/float64(max(trainTokens, 1)), len(valRows), o.SeqLen)
	} else {
		note("data: %d training rows (%d tokens, pre-tokenized), %d validation rows of %d tokens", len(packed.Rows), trainTokens, len(valRows), o.SeqLen)
	}

	var arch *architecture.Model
	if s.Arch == nil {
		arch = ParentArch(tok.VocabSize(), int(eot))
	} else {
		a := *s.Arch
		a.Vocab, a.EOS, a.BOS = tok.VocabSize(), []int{int(eot)}, -1
		arch = &a
	}
	m, err := engine.New(arch, s.Seed)
	if err != nil {
		return nil, err
	}
	var stepLog *StepLog // opened once the resumed step is known
	onStep := o.OnStep
	o.OnStep = func(st StepInfo) {
		if stepLog != nil {
			stepLog.Write(st)
		}
		if onStep != nil {
			onStep(st)
		}
	}
	tr, err := New(m, packed.Rows, valRows, o)
	if err != nil {
		return nil, err
	}
	if s.Resume {
		if err := tr.Resume(o.CheckpointPath); err != nil {
			return nil, err
		}
		note("resumed %s at step %d", o.CheckpointPath, tr.State.Step)
	}
	if s.LogPath != "" {
		from := -1
		if s.Resume {
			from = tr.State.Step
		}
		if stepLog, err = OpenStepLog(s.LogPath, from, int64(o.Batch*o.SeqLen), s.Force); err != nil {
			return nil, err
		}
		defer stepLog.Close() // best effort: the log never stops a run
	}
	note("model: %d parameters, %d layers, hidden %d; %d steps of %d×%d tokens", m.NumParams(), arch.NumLayers(), arch.Hidden, o.Steps, o.Batch, o.SeqLen)
	res, err := tr.Run(ctx)
	if err != nil {
		return nil, err
	}
	sum := &ScratchResult{Out: s.Out, Steps: tr.State.Step, Params: m.NumParams(), Vocab: tok.VocabSize(),
		TrainTokens: trainTokens, TrainLoss: res.LastLoss, ElapsedS: res.Elapsed.Seconds(), Stopped: tr.State.Step < o.Steps}
	if !math.IsNaN(res.ValLoss) {
		ppl := math.Exp(res.ValLoss)
		sum.ValLoss, sum.ValPPL = &res.ValLoss, &ppl
	}
	if sum.Stopped && !s.SavePartial {
		return sum, nil
	}
	if err := SaveHF(m, tok, s.Out, s.DType, s.Force); err != nil {
		return nil, err
	}
	sum.Saved = true
	return sum, nil
}

// SaveHF writes m, its tokenizer.json, tokenizer_config.json and
// generation_config.json (end of text as EOS and padding) to dir through one
// atomic output directory; an existing dir is replaced only with force.
func SaveHF(m *engine.Model, tok *tokenizer.TrainedBPE, dir string, dt checkpoint.DType, force bool) error {
	out, err := checkpoint.NewOutputDir(dir, force)
	if err != nil {
		return err
	}
	defer out.Abort() // does nothing after Commit
	if err := m.WriteFiles(out.Path(), dt); err != nil {
		return err
	}
	if err := tok.Save(filepath.Join(out.Path(), "tokenizer.json")); err != nil {
		return err
	}
	eot := tok.Special[EndOfText]
	gen := fmt.Sprintf("{\n  \"eos_token_id\": %d,\n  \"pad_token_id\": %d,\n  \"do_sample\": false,\n  \"max_length\": 512\n}\n", eot, eot)
	tc := fmt.Sprintf("{\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\",\n  \"eos_token\": %q,\n  \"pad_token\": %q,\n  \"model_max_length\": 512\n}\n", EndOfText, EndOfText)
	for name, body := range map[string]string{"generation_config.json": gen, "tokenizer_config.json": tc} {
		if err := os.WriteFile(filepath.Join(out.Path(), name), []byte(body), 0o666); err != nil { //output:inside
			return err
		}
	}
	return out.Commit()
}
