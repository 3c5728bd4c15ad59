package train

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/tokenizer"
)

// TestFromScratch: a run trains its tokenizer, saves a checkpoint that
// loads with the tokenizer's vocabulary; a run stopped early saves the model
// only when asked and resumes to the same steps; existing outputs are
// refused without Force.
func TestFromScratch(t *testing.T) {
	text := strings.Repeat("the cat sat on the mat. the dog sat on the log. ", 40)
	docs := []dataset.Doc{{Name: "a", Text: text}, {Name: "b", Text: strings.ToUpper(text)}}
	dir := t.TempDir()
	job := Scratch{Arch: tinyArch(0), Train: docs, Val: docs[:1], Merges: 20, Seed: 1, Out: filepath.Join(dir, "model"),
		Options: Options{Steps: 4, Batch: 2, SeqLen: 16, EvalRows: 2, CheckpointPath: filepath.Join(dir, "model.ckpt"), LogEvery: 1}}
	var notes []string
	job.Options.Progress = func(e progress.Event) {
		if e.State == progress.Note {
			notes = append(notes, e.Msg)
		}
	}
	res, err := FromScratch(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 4 || res.Stopped || !res.Saved || res.ValPPL == nil || res.Vocab != 256+20+1 || res.TrainTokens == 0 || len(notes) < 3 {
		t.Fatalf("result %+v, notes %q", res, notes)
	}
	m, err := engine.Load(job.Out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Arch().Vocab != res.Vocab || m.NumParams() != res.Params {
		t.Errorf("saved model: vocab %d, %d parameters; want %d, %d", m.Arch().Vocab, m.NumParams(), res.Vocab, res.Params)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if _, err := os.Stat(filepath.Join(job.Out, f)); err != nil {
			t.Error(err)
		}
	}
	// Existing model and checkpoint: refused before any work.
	var ee *output.ExistsError
	if _, err := FromScratch(context.Background(), job); !errors.As(err, &ee) || ee.Path != job.Out {
		t.Errorf("existing Out: %v", err)
	}
	job.Out = filepath.Join(dir, "other")
	if _, err := FromScratch(context.Background(), job); !errors.As(err, &ee) || ee.Path != job.Options.CheckpointPath {
		t.Errorf("existing checkpoint without Resume: %v", err)
	}
	// Stopped at step 2: no model without SavePartial; resumed to step 4
	// with the tokenizer of the first piece, the same final loss.
	tok, err := tokenizer.ReadTrainedBPE(filepath.Join(dir, "model", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	piece := job
	piece.Force, piece.Tokenizer = true, tok
	piece.Options.StopAt = 2
	res2, err := FromScratch(context.Background(), piece)
	if err != nil {
		t.Fatal(err)
	}
	if !res2.Stopped || res2.Saved || res2.Steps != 2 {
		t.Fatalf("stopped run: %+v", res2)
	}
	if _, err := os.Stat(piece.Out); err == nil {
		t.Error("a stopped run without SavePartial saved the model")
	}
	piece.Options.StopAt, piece.Resume, piece.Force = 0, true, false
	res3, err := FromScratch(context.Background(), piece)
	if err != nil {
		t.Fatal(err)
	}
	if res3.Steps != 4 || !res3.Saved || res3.TrainLoss != res.TrainLoss {
		t.Errorf("resumed run: %+v; want 4 steps and the uninterrupted run's loss %v", res3, res.TrainLoss)
	}
	// Token-id documents need their tokenizer.
	ids := Scratch{Train: []dataset.Doc{{Name: "ids", IDs: []int32{1, 2, 3}}}, Out: filepath.Join(dir, "ids")}
	if _, err := FromScratch(context.Background(), ids); err == nil || !strings.Contains(err.Error(), "tokenizer") {
		t.Errorf("token ids without a tokenizer: %v", err)
	}
}
