package torchref

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/train"
)

// recordRows is a train.Loss that notes the rows of every batch (in the
// order the native trainer feeds them) before computing the loss.
type recordRows struct {
	train.Loss
	rows []int
}

func (r *recordRows) Step(ctx context.Context, m *engine.Model, b *train.Batch) (float64, error) {
	r.rows = append(r.rows, b.Rows...)
	return r.Loss.Step(ctx, m, b)
}

// distillRecipe is the one recipe both trainers run.
type distillRecipe struct {
	steps, batch, seqLen, warmup int
	lr, minLR, wd, clip, temp    float64
	kd, ce                       float64
	topK                         int
	seed                         uint64
}

func (r distillRecipe) contract() map[string]any {
	return map[string]any{
		"tokens": r.steps * r.batch * r.seqLen, "seq_len": r.seqLen, "batch": r.batch,
		"lr": r.lr, "min_lr": r.minLR, "warmup_steps": r.warmup, "schedule": "cosine",
		"weight_decay": r.wd, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "clip": r.clip,
		"temperature": r.temp, "kd_weight": r.kd, "ce_weight": r.ce, "top_k": r.topK, "seed": r.seed,
	}
}

// nativeDistill runs the native distillation (distill.KD through
// train.Trainer, as distill.Run does) and returns the per-step losses, the
// rows in the order it used them, and the trained student.
func nativeDistill(t testing.TB, teacherDir, studentDir string, rows [][]int32, r distillRecipe) ([]float64, []int, *engine.Model) {
	t.Helper()
	teacher, err := engine.Load(teacherDir)
	if err != nil {
		t.Fatal(err)
	}
	student, err := engine.Load(studentDir)
	if err != nil {
		t.Fatal(err)
	}
	shared := min(teacher.Arch().Vocab, student.Arch().Vocab)
	dense := distill.NewModelTeacher(teacher)
	kd := &distill.KD{Teacher: dense, Temperature: r.temp, KDWeight: r.kd, CEWeight: r.ce, Shared: shared}
	if r.topK > 0 {
		// distill.Run's top-k path: the teacher's K largest logits per
		// position, through its cache.
		key := distill.CacheKey{Teacher: teacher.Hash(), Data: dataset.HashRows(rows), Rows: len(rows), SeqLen: r.seqLen,
			K: r.topK, Shared: shared}
		cache, err := distill.OpenTopKCache(t.TempDir(), key, dense)
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Close()
		kd.Teacher = cache
	}
	rec := &recordRows{Loss: train.FromLogits(kd)}
	var losses []float64
	o := train.Options{Steps: r.steps, Batch: r.batch, SeqLen: r.seqLen, LR: r.lr, MinLR: train.Ptr(r.minLR),
		Warmup: train.Ptr(r.warmup), WeightDecay: train.Ptr(r.wd), Beta1: train.Ptr(0.9), Beta2: train.Ptr(0.95),
		Eps: 1e-8, Clip: train.Ptr(r.clip), Seed: r.seed, Loss: rec,
		OnStep: func(s train.StepInfo) {
			if !s.Eval {
				losses = append(losses, s.Loss)
			}
		}}
	tr, err := train.New(student, rows, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return losses, rec.rows, student
}

// distillJob writes a distill job of teacher and student over the rows
// (in the order given) and valid rows.
func distillJob(t testing.TB, teacher, student string, world int, train, valid [][]int32, r distillRecipe) *testJob {
	t.Helper()
	j := newJob(t, "distill", world, r.contract())
	j.model("teacher", teacher)
	j.model("student", student)
	j.rows("train", train)
	if valid != nil {
		j.rows("valid", valid)
	}
	return j
}

// TestDistillParity: from the same DeciLM child, batches and recipe, the
// torch job on 2 gloo ranks tracks native distillation's loss within 1e-3
// relative at each of 50 steps; its checkpoint loads in the native engine,
// passes validation, and its held-out perplexity is within 1 % of the
// native student's.
func TestDistillParity(t *testing.T) {
	needTorch(t)
	r := distillRecipe{steps: 50, batch: 4, seqLen: 32, warmup: 5, lr: 2e-3, minLR: 2e-4, wd: 0.1, clip: 1,
		temp: 2, kd: 1, ce: 0.2, seed: 3}
	all := parentRows(t, 140, r.seqLen)
	rows, valid := all[:120], all[120:]
	teacher, student := mustParent(t), deciChild(t)
	want, order, native := nativeDistill(t, teacher, student, rows, r)
	// The shard holds the rows in the order the native trainer used them:
	// the torch trainer reads them in file order.
	fed := make([][]int32, len(order))
	for i, k := range order {
		fed[i] = rows[k]
	}
	j := distillJob(t, teacher, student, 2, fed, valid, r)
	contract, entry := j.write()
	mustRun(t, entry, contract, 2)
	res := j.result()
	if res["status"] != "done" {
		t.Fatalf("result %v", res)
	}
	got := res["losses"].([]any)
	if len(got) != len(want) {
		t.Fatalf("torch ran %d steps, native %d", len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		e := rel1(got[i].(float64), want[i])
		worst = max(worst, e)
		if e > 1e-3 {
			t.Errorf("step %d: torch loss %.6f, native %.6f (%.2g relative, want ≤ 1e-3)", i+1, got[i], want[i], e)
		}
	}
	t.Logf("losses: step 1 torch %.5f native %.5f; step %d torch %.5f native %.5f; worst %.2g relative",
		got[0], want[0], len(want), got[len(got)-1], want[len(want)-1], worst)

	// result.json and progress.jsonl as job/CONTRACT.md has them.
	if res["engine"] != "torch" || res["device"] != "cpu" || res["checkpoint"] != "out" {
		t.Errorf("result engine %v, device %v, checkpoint %v", res["engine"], res["device"], res["checkpoint"])
	}
	sums, _ := res["sha256"].(map[string]any)
	for _, name := range []string{"out/config.json", "out/model.safetensors", "out/tokenizer.json"} {
		if sums[name] != contractHash(t, j.dir, name) {
			t.Errorf("result.json's hash of %s is %v, the file's %s", name, sums[name], contractHash(t, j.dir, name))
		}
	}
	var vals []float64
	var checkpoints []int
	for _, l := range progressLines(t, j) {
		if v, ok := l["val_loss"].(float64); ok {
			vals = append(vals, v)
		}
		if l["event"] == "checkpoint" {
			checkpoints = append(checkpoints, int(l["step"].(float64)))
		}
	}
	if len(vals) != 2 || vals[1] != res["loss"] {
		t.Errorf("val_loss lines %v (want one before the first step, one after the last = result loss %v)", vals, res["loss"])
	}
	if !slices.Equal(checkpoints, []int{10, 20, 30, 40, 50}) {
		t.Errorf("checkpoint events at steps %v, want every 10", checkpoints)
	}

	out := filepath.Join(j.dir, "out")
	if err := export.CheckDir(out, ""); err != nil {
		t.Errorf("the torch checkpoint does not validate: %v", err)
	}
	m, err := engine.Load(out)
	if err != nil {
		t.Fatalf("the torch checkpoint does not load in the native engine: %v", err)
	}
	lt, err := train.MeanLoss(m, valid, r.batch)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := train.MeanLoss(native, valid, r.batch)
	if err != nil {
		t.Fatal(err)
	}
	pt, pn := math.Exp(lt), math.Exp(ln)
	t.Logf("held-out perplexity: torch checkpoint %.4f, native student %.4f (%.2g relative)", pt, pn, rel1(pt, pn))
	if rel1(pt, pn) > 0.01 {
		t.Errorf("held-out perplexity %.4f, native %.4f: more than 1 %% apart", pt, pn)
	}
}

// TestDistillTopKParity: the same with a top-8 teacher (native: distill.Run's
// top-k cache), 12 steps.
func TestDistillTopKParity(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a third 2-rank distillation; TestDistillParity covers the dense teacher")
	}
	needTorch(t)
	r := distillRecipe{steps: 12, batch: 4, seqLen: 32, warmup: 2, lr: 2e-3, minLR: 2e-4, wd: 0.1, clip: 1,
		temp: 1.5, kd: 1, ce: 0.1, topK: 8, seed: 4}
	rows := parentRows(t, 48, r.seqLen)
	teacher, student := mustParent(t), deciChild(t)
	want, order, _ := nativeDistill(t, teacher, student, rows, r)
	fed := make([][]int32, len(order))
	for i, k := range order {
		fed[i] = rows[k]
	}
	j := distillJob(t, teacher, student, 2, fed, nil, r)
	contract, entry := j.write()
	mustRun(t, entry, contract, 2)
	got := j.result()["losses"].([]any)
	if len(got) != len(want) {
		t.Fatalf("torch ran %d steps, native %d", len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		e := rel1(got[i].(float64), want[i])
		worst = max(worst, e)
		if e > 1e-3 {
			t.Errorf("step %d: torch loss %.6f, native %.6f (%.2g relative, want ≤ 1e-3)", i+1, got[i], want[i], e)
		}
	}
	t.Logf("top-%d losses: step 1 torch %.5f native %.5f; worst %.2g relative", r.topK, got[0], want[0], worst)
}

// distillRepeated runs a 2-rank distillation job of student from teacher by
// recipe r on the same batch every step (rows of seed, held-out rows of
// seed+1), so that the KD loss measures learning rather than the batch:
// the job is done with a loss per step, the loss falls, and the output
// validates with the student's shape. It returns the job, its result and
// the held-out rows. The MoE, Nemotron-H and gpt-oss distillation tests
// share it.
func distillRepeated(t *testing.T, teacher, student string, r distillRecipe, seed uint64) (*testJob, map[string]any, [][]int32) {
	t.Helper()
	batch := randomRows(r.batch, r.seqLen, 300, seed)
	var rows [][]int32
	for range r.steps {
		rows = append(rows, batch...)
	}
	valid := randomRows(8, r.seqLen, 300, seed+1)
	j := distillJob(t, teacher, student, 2, rows, valid, r)
	contract, entry := j.write()
	mustRun(t, entry, contract, 2)
	res := j.result()
	if res["status"] != "done" {
		t.Fatalf("result %v", res)
	}
	losses := res["losses"].([]any)
	if len(losses) != r.steps {
		t.Fatalf("%d losses, want %d", len(losses), r.steps)
	}
	first, last := losses[0].(float64), losses[len(losses)-1].(float64)
	t.Logf("KD loss step 1 %.6f, step %d %.6f; held-out loss %v; %v tokens/s over %v s", first, r.steps, last, res["loss"], res["tokens_per_s"], res["elapsed_s"])
	if !(last < first) {
		t.Errorf("the loss did not fall: step 1 %.6f, step %d %.6f", first, r.steps, last)
	}
	out := filepath.Join(j.dir, "out")
	if err := export.CheckDir(out, ""); err != nil {
		t.Errorf("the torch checkpoint does not validate: %v", err)
	}
	if got, want := shape(t, out), shape(t, student); !jsonEqual(got, want) {
		t.Errorf("checkpoint shape %v, want the child's %v", got, want)
	}
	return j, res, valid
}
