package distill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/prune"
	"github.com/autocompress/autocompress/train"
)

// text is a few kB of plain English for tests (written for them).
const text = `The committee met again in the autumn, when the roads were dry and the
harvest was in. Its members agreed that the bridge over the river should be
rebuilt in stone, and that the cost should be shared by the towns on either
bank. Some thought the old wooden bridge would last another ten years; others
said it had already lasted twenty years too long.

Mrs. Hale listened to the debate from the back of the room. She had crossed
that bridge every week of her life, first with her mother and then with her
own children, and she did not believe that stone would make it any safer. What
made a bridge safe, she said when at last they asked her, was that people
looked after it. The chairman thanked her and wrote her words in the minutes.

In the spring the masons came. They worked from the first light until the sun
went down, and by the summer the new arches stood over the water. The old
bridge was taken apart plank by plank, and the planks were sold to build
barns. The towns held a fair on the day the new bridge opened, and everyone
agreed that it had been worth the money and the years of argument.

The President told the Congress that the nation had grown in strength and in
wealth, that its trade had increased, and that its people were at peace with
their neighbours. He asked for new roads and canals, for schools in every
state, and for a navy that could protect the commerce of the country on every
sea. The members listened, and some of them applauded, and the next day the
newspapers printed the whole of the address.`

// corpusFile writes text (n copies) to a file.
func corpusFile(t *testing.T, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "text.txt")
	if err := os.WriteFile(p, []byte(strings.Repeat(text+"\n\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func seq(n, step int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i * step
	}
	return s
}

// child prunes the embedded parent: hidden 192 → 128, FFN 512 → 256 (or
// per-layer widths in the decilm format), two of its eight layers dropped.
func child(t *testing.T, format string) string {
	t.Helper()
	pdir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	plan := &prune.Plan{Version: 1, Hidden: seq(128, 1), OutputFormat: format}
	for l := range 8 {
		lp := prune.LayerPlan{Layer: l, Neurons: seq(256, 2)}
		switch {
		case l == 3 || l == 5:
			lp = prune.LayerPlan{Layer: l, Remove: true}
		case format == prune.FormatDeciLM && l%2 == 1:
			lp.Neurons = seq(512, 1) // keep every neuron: per-layer widths
		}
		plan.Layers = append(plan.Layers, lp)
	}
	out := filepath.Join(t.TempDir(), "child-"+format)
	if _, err := prune.Prune(context.Background(), prune.Options{Model: pdir, Plan: plan, Out: out}); err != nil {
		t.Fatal(err)
	}
	return out
}

func testConfig(t *testing.T, student, data string, steps int) Config {
	t.Helper()
	pdir, err := parent.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := Config{
		Teacher: pdir, Student: student, Out: filepath.Join(dir, "out"),
		Data: []string{data}, EvalData: []string{data},
		Tokens: int64(steps * 2 * 32), Temperature: 2, CEWeight: train.Ptr(0.2),
		Train: train.Options{Batch: 2, SeqLen: 32, LR: 2e-3, Seed: 3, EvalRows: 8, CheckpointEvery: 4},
	}
	c.EnsureDefaults()
	return c
}

// TestRunKeepsFormat: a native and a DeciLM child are distilled; each
// output has the student's architecture class, config and dtype, passes
// validation, loads, carries the tokenizer, and fits the data better.
func TestRunKeepsFormat(t *testing.T) {
	data := corpusFile(t, 2)
	for _, format := range []string{prune.FormatNative, prune.FormatDeciLM} {
		t.Run(format, func(t *testing.T) {
			st := child(t, format)
			c := testConfig(t, st, data, 8)
			sum, err := Run(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if sum.After.Loss >= sum.Before.Loss {
				t.Errorf("held-out loss %.4f before, %.4f after: distillation did not help", sum.Before.Loss, sum.After.Loss)
			}
			if err := export.CheckDir(c.Out, ""); err != nil {
				t.Error(err)
			}
			a, b := configKeys(t, st), configKeys(t, c.Out)
			if a["architectures"] != b["architectures"] || a["block_configs"] != b["block_configs"] || a["intermediate_size"] != b["intermediate_size"] {
				t.Errorf("config changed:\nstudent %v\noutput  %v", a, b)
			}
			for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
				x, _ := os.ReadFile(filepath.Join(st, f))
				y, err := os.ReadFile(filepath.Join(c.Out, f))
				if err != nil || !bytes.Equal(x, y) {
					t.Errorf("%s not copied through (%v)", f, err)
				}
			}
			if dt, _ := weightDType(c.Out); dt != checkpoint.BF16 {
				t.Errorf("output dtype %s, student's BF16", dt)
			}
			m, err := engine.Load(c.Out)
			if err != nil {
				t.Fatal(err)
			}
			if m.NumParams() != sum.StudentParams {
				t.Errorf("output has %d parameters, student %d", m.NumParams(), sum.StudentParams)
			}
			if b, err := os.ReadFile(c.LogPath); err != nil || bytes.Count(b, []byte("\n")) != 8+1 {
				t.Errorf("log %s: want 8 step lines and 1 evaluation: %q %v", c.LogPath, b, err)
			}
		})
	}
}

// configKeys returns config.json's top-level values, re-encoded as
// strings for comparison.
func configKeys(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range m {
		var x any
		json.Unmarshal(v, &x)
		e, _ := json.Marshal(x)
		out[k] = string(e)
	}
	return out
}

// TestPaddedVocabulary: a student whose embedding has 64 padding rows
// beyond the tokenizer's 4096 ids is distilled over the shared ids, with
// a note, and keeps its 4160 rows.
func TestPaddedVocabulary(t *testing.T) {
	st := child(t, prune.FormatNative)
	m, err := engine.Load(st)
	if err != nil {
		t.Fatal(err)
	}
	a := m.Arch()
	a.Vocab += 64
	p, err := engine.New(a, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Specs() {
		copy(p.Tensor(s.Name), m.Tensor(s.Name)) // embedding: the first 4096 rows
	}
	padded := filepath.Join(t.TempDir(), "padded")
	if err := p.Save(padded, checkpoint.BF16); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.CopyFiles(padded, st, []string{"tokenizer.json", "tokenizer_config.json"}); err != nil {
		t.Fatal(err)
	}
	c := testConfig(t, padded, corpusFile(t, 1), 2)
	var notes []string
	steps := 0
	c.Progress = func(e progress.Event) {
		switch {
		case e.Stage != "distill":
			t.Errorf("event of stage %q: %+v", e.Stage, e)
		case e.State == progress.Note:
			notes = append(notes, e.Msg)
		case e.Unit == "step" && e.Done > 0:
			steps++
		}
	}
	sum, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if steps != sum.Steps || len(notes) == 0 || notes[0] != sum.VocabNote {
		t.Errorf("%d step events for %d steps; notes %q (the first should be the vocabulary's)", steps, sum.Steps, notes)
	}
	if sum.SharedVocab != 4096 || !strings.Contains(sum.VocabNote, "differ only by padding") || !strings.Contains(sum.VocabNote, "4160") {
		t.Errorf("shared %d, note %q", sum.SharedVocab, sum.VocabNote)
	}
	out, err := engine.Load(c.Out)
	if err != nil {
		t.Fatal(err)
	}
	if out.Arch().Vocab != 4160 {
		t.Errorf("output vocab %d, want the student's 4160", out.Arch().Vocab)
	}
}

// TestTokenizerMismatch: a student with another tokenizer is refused with
// the differing id named, before the data is read (the data file does not
// exist).
func TestTokenizerMismatch(t *testing.T) {
	st := child(t, prune.FormatNative)
	p := filepath.Join(st, "tokenizer.json")
	b, _ := os.ReadFile(p)
	var tj map[string]any
	if err := json.Unmarshal(b, &tj); err != nil {
		t.Fatal(err)
	}
	vocab := tj["model"].(map[string]any)["vocab"].(map[string]any)
	// Swap the ids of two tokens: same token set, different numbering.
	x, y := vocab["the"], vocab["and"]
	if x == nil || y == nil {
		t.Fatal("the parent's vocabulary lacks 'the' or 'and'")
	}
	vocab["the"], vocab["and"] = y, x
	nb, _ := json.Marshal(tj)
	os.WriteFile(p, nb, 0o644)
	c := testConfig(t, st, filepath.Join(t.TempDir(), "missing.txt"), 2)
	_, err := Run(context.Background(), c)
	var ve *VocabError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "tokenizers differ at id") {
		t.Fatalf("err = %v, want a *VocabError naming the id", err)
	}
}

// TestResumeBitIdentical: 12 steps straight, and 5 steps, a stop, and a
// resumed run from the checkpoint, give byte-identical outputs and final
// checkpoints; with the top-k cache the second student reads every row.
func TestResumeBitIdentical(t *testing.T) {
	st := child(t, prune.FormatNative)
	data := corpusFile(t, 2)
	for _, topk := range []int{0, 16} {
		cache := t.TempDir()
		a := testConfig(t, st, data, 12)
		a.TopK, a.CacheDir = topk, cache
		sa, err := Run(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		b := testConfig(t, st, data, 12)
		b.TopK, b.CacheDir = topk, cache
		b.Train.StopAt = 5
		s1, err := Run(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if s1.StoppedAt != 5 {
			t.Fatalf("stopped at %d, want 5", s1.StoppedAt)
		}
		if _, err := os.Stat(b.Out); err == nil {
			t.Fatal("a stopped run wrote its output")
		}
		b.Train.StopAt = 0
		b.Resume = true
		sb, err := Run(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if sb.ResumedAt != 5 { // a stop writes a checkpoint
			t.Errorf("resumed at %d, want 5", sb.ResumedAt)
		}
		for _, f := range []string{filepath.Join(a.Out, "model.safetensors"), a.Checkpoint} {
			g := strings.Replace(f, filepath.Dir(a.Out), filepath.Dir(b.Out), 1)
			x, _ := os.ReadFile(f)
			y, _ := os.ReadFile(g)
			if len(x) == 0 || !bytes.Equal(x, y) {
				t.Errorf("top-k %d: %s and %s differ (%d, %d bytes)", topk, f, g, len(x), len(y))
			}
		}
		if topk > 0 && (sa.CacheMisses == 0 || sb.CacheMisses != 0 || sb.CacheHits == 0) {
			t.Errorf("cache: first run %d hits %d misses; resumed second %d hits %d misses", sa.CacheHits, sa.CacheMisses, sb.CacheHits, sb.CacheMisses)
		}
		if sa.After.Loss != sb.After.Loss {
			t.Errorf("top-k %d: held-out loss %v vs %v", topk, sa.After.Loss, sb.After.Loss)
		}
	}
}

// TestOutputsNotOverwritten: an existing --out or checkpoint is refused
// without Force (or Resume).
func TestOutputsNotOverwritten(t *testing.T) {
	c := testConfig(t, "unused", "unused", 2)
	os.MkdirAll(c.Out, 0o755)
	var ex *checkpoint.ExistsError
	if _, err := Run(context.Background(), c); !errors.As(err, &ex) {
		t.Errorf("existing output: err = %v", err)
	}
	os.Remove(c.Out)
	os.WriteFile(c.Checkpoint, []byte("x"), 0o644)
	// The one exists-error (the command adds its flags to the message),
	// saying that the checkpoint can be resumed.
	if _, err := Run(context.Background(), c); !errors.As(err, &ex) || ex.Path != c.Checkpoint || !strings.Contains(err.Error(), "resume") || strings.Contains(err.Error(), "--") {
		t.Errorf("existing checkpoint: err = %v", err)
	}
	if b, _ := os.ReadFile(c.Checkpoint); string(b) != "x" {
		t.Error("the checkpoint was touched")
	}
}
