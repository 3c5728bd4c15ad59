package train

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"time"

	"github.com/autocompress/autocompress/engine"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
)

// Options configures a training run. Zero fields take the defaults of
// EnsureDefaults. The fields for which 0 is a legal value (MinLR, Warmup,
// WeightDecay, Beta1, Beta2, Clip) are pointers: nil takes the default, and a
// pointer to 0 means 0 (set them with Ptr, e.g. WeightDecay: Ptr(0.0)).
type Options struct {
	Steps  int // optimiser steps in the whole run (default 1000)
	Batch  int // sequences per step (default 8)
	SeqLen int // tokens per sequence; data rows hold SeqLen+1 (default 128)

	LR          float64  // peak learning rate (default 3e-3)
	MinLR       *float64 // final learning rate (default LR/10)
	Warmup      *int     // warm-up steps (default Steps/20, at least 1)
	WeightDecay *float64 // decoupled weight decay (default 0.1)
	Beta1       *float64 // default 0.9
	Beta2       *float64 // default 0.95
	Eps         float64  // must be positive (default 1e-8)
	Clip        *float64 // global gradient-norm limit, <= 0 disables (default 1)

	EvalEvery int // evaluate every this many steps, 0 = only at the end
	EvalRows  int // held-out rows per evaluation (default 64)
	LogEvery  int // log a training line every this many steps (default 10)

	// CheckpointPath is the file that checkpoints are written to (atomically)
	// every CheckpointEvery steps, at the end, and when the context is
	// cancelled. Empty disables checkpoints.
	CheckpointPath  string
	CheckpointEvery int // default 100

	Seed uint64 // data order

	// StopAt, when positive, ends Run after this step as an interruption
	// would (checkpoint written, schedule unchanged), so a long run can be
	// done in pieces with Resume.
	StopAt int

	// Loss computes each step's loss and gradient; nil is CrossEntropy.
	Loss Loss
	// Tag identifies everything besides the model, the data and the seed
	// that the steps depend on (e.g. a hash of a distillation's teacher and
	// loss settings). It is stored in checkpoints and Resume refuses a
	// checkpoint with another tag.
	Tag string

	// OnStep, when set, is called after every optimiser step (and after
	// every evaluation, with Eval set): the hook for a loss log. Progress
	// for a person goes through Progress.
	OnStep func(StepInfo)

	Log io.Writer // log lines; nil = none
	// Progress receives the steps (stage "train", unit "step", the loss and
	// learning rate as the message; the steps of a resumed checkpoint as
	// Resumed) and, without a Log (which has its line), each evaluation as
	// a note; nil = none.
	Progress progress.Func
}

// Ptr returns a pointer to v, for the pointer fields of Options.
func Ptr[T any](v T) *T { return &v }

// StepInfo describes one finished step for Options.OnStep.
type StepInfo struct {
	Step, Steps int     // steps done, of the whole run
	Loss        float64 // this step's training loss
	LR          float64 // the learning rate the step used
	GradNorm    float64 // global gradient norm before clipping
	// Tokens and Elapsed count this call of Run only (a resumed run starts
	// from 0), so Tokens/Elapsed is the current rate.
	Tokens  int64
	Elapsed time.Duration
	ETA     time.Duration // remaining time at the current rate
	// Eval is true when this call reports an evaluation (ValLoss set)
	// rather than a training step.
	Eval    bool
	ValLoss float64
}

// EnsureDefaults fills zero (or nil) fields and returns o.
func (o *Options) EnsureDefaults() *Options {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	deff := func(p *float64, v float64) {
		if *p == 0 {
			*p = v
		}
	}
	defp := func(p **float64, v float64) {
		if *p == nil {
			*p = Ptr(v)
		}
	}
	def(&o.Steps, 1000)
	def(&o.Batch, 8)
	def(&o.SeqLen, 128)
	deff(&o.LR, 3e-3)
	defp(&o.MinLR, o.LR/10)
	if o.Warmup == nil {
		o.Warmup = Ptr(max(1, o.Steps/20))
	}
	defp(&o.WeightDecay, 0.1)
	defp(&o.Beta1, 0.9)
	defp(&o.Beta2, 0.95)
	deff(&o.Eps, 1e-8)
	defp(&o.Clip, 1)
	def(&o.EvalRows, 64)
	def(&o.LogEvery, 10)
	def(&o.CheckpointEvery, 100)
	if o.Loss == nil {
		o.Loss = CrossEntropy{}
	}
	return o
}

// Validate reports the first invalid option. Call it after EnsureDefaults.
func (o *Options) Validate() error {
	if o.MinLR == nil || o.Warmup == nil || o.WeightDecay == nil || o.Beta1 == nil || o.Beta2 == nil || o.Clip == nil {
		return errors.New("train: options not completed: call EnsureDefaults before Validate")
	}
	switch b1, b2 := *o.Beta1, *o.Beta2; {
	case o.Steps < 1:
		return fmt.Errorf("train: steps %d: want at least 1", o.Steps)
	case o.Batch < 1 || o.SeqLen < 1:
		return fmt.Errorf("train: batch %d × sequence length %d: both must be positive", o.Batch, o.SeqLen)
	case o.LR <= 0 || *o.MinLR < 0 || *o.MinLR > o.LR:
		return fmt.Errorf("train: learning rate %g → %g: want 0 <= min <= peak, peak > 0", o.LR, *o.MinLR)
	case *o.Warmup < 0:
		return fmt.Errorf("train: warm-up %d steps: want >= 0", *o.Warmup)
	case *o.WeightDecay < 0:
		return fmt.Errorf("train: weight decay %g: want >= 0", *o.WeightDecay)
	case b1 < 0 || b1 >= 1 || b2 < 0 || b2 >= 1:
		return fmt.Errorf("train: betas %g, %g: want [0, 1)", b1, b2)
	case o.Eps <= 0:
		return fmt.Errorf("train: epsilon %g: want > 0", o.Eps)
	case o.EvalEvery < 0 || o.CheckpointEvery < 0 || o.LogEvery < 0:
		return errors.New("train: eval, log and checkpoint intervals must be >= 0")
	}
	return nil
}

// State is the JSON header of a checkpoint: everything besides the slabs
// that the next step depends on.
type State struct {
	Version int    `json:"version"`
	Step    int    `json:"step"`  // steps completed
	Epoch   int    `json:"epoch"` // data epoch of the next batch
	Index   int    `json:"index"` // row index within the epoch's permutation
	Seed    uint64 `json:"seed"`
	// Params is the number of parameters; Arch a hash of the tensor names
	// and shapes (a checkpoint only resumes the same architecture).
	Params int    `json:"params"`
	Arch   string `json:"arch"`
	// TrainRows guards against resuming on other data.
	TrainRows int `json:"train_rows"`
	SeqLen    int `json:"seq_len"`
	// Tag is Options.Tag (omitted when empty).
	Tag string `json:"tag,omitempty"`
	// Losses logged so far (for reports), and the best validation loss.
	LastLoss float64 `json:"last_loss"`
	ValLoss  float64 `json:"val_loss,omitempty"` // 0 until evaluated
}

// Trainer runs one training job.
type Trainer struct {
	Model *engine.Model
	Opt   *AdamW
	State State

	o          Options
	train, val [][]int32
	perm       []int
	permEpoch  int
	inputs     []int32
	targets    []int32
	rows       []int
}

// New prepares training of m on rows of SeqLen+1 token ids (train), with
// val rows for evaluation (may be empty).
func New(m *engine.Model, train, val [][]int32, o Options) (*Trainer, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(train) < o.Batch {
		return nil, fmt.Errorf("train: %d training rows of %d tokens, fewer than one batch of %d; give more data or a smaller batch or sequence length", len(train), o.SeqLen+1, o.Batch)
	}
	for _, set := range [][][]int32{train, val} {
		for i, r := range set {
			if len(r) != o.SeqLen+1 {
				return nil, fmt.Errorf("train: row %d has %d tokens, want seq-len+1 = %d", i, len(r), o.SeqLen+1)
			}
		}
	}
	var spans []Span
	for _, s := range m.Specs() {
		off, _ := m.Offset(s.Name)
		spans = append(spans, Span{Name: s.Name, Offset: off, Len: s.Size()})
	}
	t := &Trainer{
		Model: m, o: o, train: train, val: val, permEpoch: -1,
		Opt:     NewAdamW(m.NumParams(), spans, *o.Beta1, *o.Beta2, o.Eps, *o.WeightDecay),
		State:   State{Version: 1, Seed: o.Seed, Params: m.NumParams(), Arch: m.ArchHash(), TrainRows: len(train), SeqLen: o.SeqLen, Tag: o.Tag},
		inputs:  make([]int32, o.Batch*o.SeqLen),
		targets: make([]int32, o.Batch*o.SeqLen),
		rows:    make([]int, o.Batch),
	}
	return t, nil
}

func (t *Trainer) logf(format string, a ...any) {
	if t.o.Log != nil {
		fmt.Fprintf(t.o.Log, format+"\n", a...)
	}
}

// nextBatch fills inputs/targets from the data position and advances it.
func (t *Trainer) nextBatch() {
	T := t.o.SeqLen
	for b := 0; b < t.o.Batch; b++ {
		if t.State.Index >= len(t.train) {
			t.State.Epoch++
			t.State.Index = 0
		}
		if t.permEpoch != t.State.Epoch {
			t.perm = epochOrder(t.State.Seed, t.State.Epoch, len(t.train))
			t.permEpoch = t.State.Epoch
		}
		t.rows[b] = t.perm[t.State.Index]
		row := t.train[t.rows[b]]
		t.State.Index++
		copy(t.inputs[b*T:], row[:T])
		copy(t.targets[b*T:], row[1:])
	}
}

// epochOrder is the order of n training rows in epoch e of a run seeded
// with seed: a fresh permutation every epoch.
func epochOrder(seed uint64, e, n int) []int {
	return rand.New(rand.NewPCG(seed, uint64(e))).Perm(n)
}

// RowOrder returns the training rows (indices into n rows) that the first
// count sequences of a run seeded with seed take, in the order its steps
// take them (Batch per step): what a PyTorch job of the same run reads
// sequentially (package job).
func RowOrder(n int, seed uint64, count int) []int {
	out := make([]int, 0, count)
	for e := 0; len(out) < count && n > 0; e++ {
		p := epochOrder(seed, e, n)
		out = append(out, p[:min(n, count-len(out))]...)
	}
	return out
}

// Evaluate returns the mean cross-entropy (nats per token) over the first
// EvalRows validation rows, in batches of Batch.
func (t *Trainer) Evaluate() (float64, error) {
	rows := t.val[:min(len(t.val), t.o.EvalRows)]
	if len(rows) == 0 {
		return math.NaN(), nil
	}
	return MeanLoss(t.Model, rows, t.o.Batch)
}

// MeanLoss returns the token-weighted mean cross-entropy of m over rows of
// equal length n+1 (inputs row[:n], targets row[1:]), batch rows at a time.
func MeanLoss(m *engine.Model, rows [][]int32, batch int) (float64, error) {
	if len(rows) == 0 {
		return math.NaN(), errors.New("train: no rows to evaluate")
	}
	T := len(rows[0]) - 1
	var sum float64
	var n int
	for i := 0; i < len(rows); i += batch {
		part := rows[i:min(i+batch, len(rows))]
		in := make([]int32, 0, len(part)*T)
		tg := make([]int32, 0, len(part)*T)
		for _, r := range part {
			in = append(in, r[:T]...)
			tg = append(tg, r[1:]...)
		}
		l, err := m.ForwardLoss(in, tg, len(part), T)
		if err != nil {
			return 0, err
		}
		sum += float64(l) * float64(len(part)*T)
		n += len(part) * T
	}
	return sum / float64(n), nil
}

// Result summarises a run.
type Result struct {
	Steps     int
	FirstLoss float64 // training loss of the first step run in this call
	LastLoss  float64 // training loss of the last step
	ValLoss   float64 // last validation loss (NaN without validation data)
	Tokens    int64   // training tokens processed in this call
	Elapsed   time.Duration
}

// Run trains until Steps steps are done (continuing from State.Step),
// evaluating, logging and checkpointing as configured. When ctx is
// cancelled it writes a checkpoint (if configured) and returns ctx.Err().
func (t *Trainer) Run(ctx context.Context) (Result, error) {
	o := t.o
	sched := Schedule{Peak: o.LR, Min: *o.MinLR, Warmup: *o.Warmup, Total: o.Steps}
	res := Result{FirstLoss: math.NaN(), ValLoss: math.NaN()}
	if t.State.ValLoss != 0 {
		res.ValLoss = t.State.ValLoss
	}
	start := time.Now()
	task := progress.Start(o.Progress, progress.Event{Stage: "train", Total: int64(o.Steps), Unit: "step"})
	task.Resume(int64(t.State.Step))
	checkpoint := func() error {
		if o.CheckpointPath == "" {
			return nil
		}
		return t.Save(o.CheckpointPath)
	}
	for t.State.Step < o.Steps {
		if o.StopAt > 0 && t.State.Step >= o.StopAt {
			res.Elapsed = time.Since(start)
			return res, checkpoint()
		}
		if err := ctx.Err(); err != nil {
			if cerr := checkpoint(); cerr != nil {
				return res, errors.Join(err, cerr)
			}
			t.logf("interrupted at step %d; checkpoint %s", t.State.Step, o.CheckpointPath)
			return res, err
		}
		lr := sched.LR(t.State.Step)
		epoch, index := t.State.Epoch, t.State.Index
		t.nextBatch()
		t.Model.ZeroGrad()
		batch := &Batch{Inputs: t.inputs, Targets: t.targets, Rows: t.rows, B: o.Batch, T: o.SeqLen, Step: t.State.Step}
		loss, err := o.Loss.Step(ctx, t.Model, batch)
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				// Undo the batch; the check at the top of the loop
				// checkpoints and returns.
				t.State.Epoch, t.State.Index = epoch, index
				continue
			}
			return res, fmt.Errorf("train: step %d: %w", t.State.Step, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return res, fmt.Errorf("train: step %d: loss is %v; lower the learning rate (now %g)", t.State.Step, loss, lr)
		}
		norm := ClipGradNorm(t.Model.Grads(), *o.Clip)
		if err := t.Opt.Step(t.Model.Params(), t.Model.Grads(), lr); err != nil {
			return res, err
		}
		t.State.Step++
		t.State.LastLoss = float64(loss)
		if math.IsNaN(res.FirstLoss) {
			res.FirstLoss = float64(loss)
		}
		res.LastLoss = float64(loss)
		res.Steps++
		res.Tokens += int64(o.Batch * o.SeqLen)
		task.Set(int64(t.State.Step), fmt.Sprintf("loss %.4f lr %.3g", loss, lr))
		el := time.Since(start)
		eta := time.Duration(float64(el) / float64(res.Steps) * float64(o.Steps-t.State.Step)).Round(time.Second)
		if o.LogEvery > 0 && t.State.Step%o.LogEvery == 0 {
			t.logf("step %d/%d loss %.4f lr %.3g grad-norm %.3g %.0f tok/s ETA %s", t.State.Step, o.Steps, loss, lr, norm, float64(res.Tokens)/el.Seconds(), eta)
		}
		info := StepInfo{Step: t.State.Step, Steps: o.Steps, Loss: loss, LR: lr, GradNorm: norm, Tokens: res.Tokens, Elapsed: el, ETA: eta}
		if o.OnStep != nil {
			o.OnStep(info)
		}
		last := t.State.Step == o.Steps
		if (o.EvalEvery > 0 && t.State.Step%o.EvalEvery == 0) || last {
			vl, err := t.Evaluate()
			if err != nil {
				return res, err
			}
			if !math.IsNaN(vl) {
				t.State.ValLoss = vl
				res.ValLoss = vl
				t.logf("step %d validation loss %.4f perplexity %.2f", t.State.Step, vl, math.Exp(vl))
				if o.Log == nil {
					task.Notef("step %d/%d held-out loss %.4f perplexity %.2f", t.State.Step, o.Steps, vl, math.Exp(vl))
				}
				if o.OnStep != nil {
					info.Eval, info.ValLoss = true, vl
					o.OnStep(info)
				}
			}
		}
		if o.CheckpointEvery > 0 && t.State.Step%o.CheckpointEvery == 0 || last {
			if err := checkpoint(); err != nil {
				return res, err
			}
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

const magic = "ACTRAIN1"

// Save writes a checkpoint to path atomically (temporary file in the same
// directory, fsync, rename).
func (t *Trainer) Save(path string) (err error) {
	hdr, err := json.Marshal(t.State)
	if err != nil {
		return err
	}
	f, err := output.CreateFile(path, true)
	if err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	defer f.Abort() // does nothing after Commit
	crc := crc32.NewIEEE()
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<20)
	w.WriteString(magic)
	binary.Write(w, binary.LittleEndian, uint64(len(hdr)))
	w.Write(hdr)
	for _, slab := range [][]float32{t.Model.Params(), t.Opt.M, t.Opt.V} {
		if err := writeFloats(w, slab); err != nil {
			return fmt.Errorf("train: checkpoint %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	if err := binary.Write(f, binary.LittleEndian, crc.Sum32()); err != nil {
		return fmt.Errorf("train: checkpoint %s: %w", path, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("train: checkpoint: %w", err)
	}
	return nil
}

func writeFloats(w io.Writer, s []float32) error {
	buf := make([]byte, 4*4096)
	for len(s) > 0 {
		n := min(len(s), 4096)
		for i, v := range s[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		if _, err := w.Write(buf[:4*n]); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}

// CheckpointError reports a checkpoint that cannot be resumed.
type CheckpointError struct {
	Path string
	Msg  string
}

func (e *CheckpointError) Error() string { return "train: checkpoint " + e.Path + ": " + e.Msg }

// Resume loads the checkpoint at path into the trainer: parameters, AdamW
// moments, step and data position. The checkpoint must come from the same
// architecture, data and sequence length.
func (t *Trainer) Resume(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("train: resume: %w", err)
	}
	bad := func(f string, a ...any) error { return &CheckpointError{Path: path, Msg: fmt.Sprintf(f, a...)} }
	if len(b) < len(magic)+8+4 || string(b[:len(magic)]) != magic {
		return bad("not a training checkpoint (no %q magic)", magic)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return bad("CRC mismatch: the file is truncated or corrupt")
	}
	hl := binary.LittleEndian.Uint64(b[len(magic):])
	off := uint64(len(magic) + 8)
	if hl > uint64(len(body))-off {
		return bad("header length %d at byte %#x exceeds the file", hl, len(magic))
	}
	var st State
	if err := json.Unmarshal(body[off:off+hl], &st); err != nil {
		return bad("header: %v", err)
	}
	off += hl
	switch {
	case st.Arch != t.State.Arch || st.Params != t.State.Params:
		return bad("architecture %s (%d parameters) differs from the model being trained (%s, %d)", st.Arch, st.Params, t.State.Arch, t.State.Params)
	case st.TrainRows != t.State.TrainRows || st.SeqLen != t.State.SeqLen:
		return bad("made on %d rows of %d tokens; now %d rows of %d: resume with the same data and sequence length", st.TrainRows, st.SeqLen, t.State.TrainRows, t.State.SeqLen)
	case st.Seed != t.State.Seed:
		return bad("seed %d differs from this run's seed %d", st.Seed, t.State.Seed)
	case st.Tag != t.State.Tag:
		return bad("made with other settings (tag %q, now %q): resume with the same options", st.Tag, t.State.Tag)
	}
	n := uint64(st.Params)
	if uint64(len(body))-off != 3*4*n {
		return bad("%d bytes of tensors, want %d", uint64(len(body))-off, 3*4*n)
	}
	for _, slab := range [][]float32{t.Model.Params(), t.Opt.M, t.Opt.V} {
		for i := range slab {
			slab[i] = math.Float32frombits(binary.LittleEndian.Uint32(body[off:]))
			off += 4
		}
	}
	t.Opt.T = st.Step
	t.State = st
	t.permEpoch = -1
	return nil
}
