package prune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/export"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/prune/remotecode"
)

// Options configures Prune.
type Options struct {
	// Model is the parent checkpoint directory (config.json + safetensors).
	Model string
	// Plan says what the child keeps.
	Plan *Plan
	// Out is the child's directory. It must not exist unless Force is set.
	Out   string
	Force bool
	// Format and Engine override the plan's output_format and engine when
	// not empty; Engine may list several ("vllm,llamacpp") or be "all".
	Format, Engine string
	// ExtraFiles are copied into the child directory (by base name), after
	// the files prune writes, e.g. a DeciLM modeling_decilm.py that
	// transformers' AutoModelForCausalLM needs (prune writes the
	// configuration module itself and names a modeling module in auto_map
	// only when the child contains one).
	ExtraFiles []string
	// Progress receives the tensor bytes written (stage "prune", unit "B");
	// nil = none.
	Progress progress.Func
	// TP is the tensor-parallel size the child is served with (0: none);
	// the default validator then checks head and width divisibility.
	TP int
	// CheckChild, when not nil, replaces the default check of the finished
	// child directory (export.ValidateDirWith for the engine and TP) before
	// it is moved into place; an error aborts the run and removes the output.
	CheckChild func(dir, engine string) error
}

// Result describes a written child.
type Result struct {
	Dir     string
	Layout  *Layout
	Files   []string // safetensors files written, in order
	Tensors int
	Bytes   int64 // tensor data written
}

// Prune writes the child of opt.Model described by opt.Plan to opt.Out, one
// tensor at a time: memory stays at a few MiB of buffers whatever the model
// size (tensors are read with pread, never loaded whole). The output is
// built in a temporary directory beside Out and renamed into place only when
// every file is written and validated; a cancelled context or any error
// leaves no output behind.
func Prune(ctx context.Context, opt Options) (res *Result, err error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	planCopy := *opt.Plan
	plan := &planCopy
	if opt.Format != "" {
		planCopy.OutputFormat = opt.Format
	}
	if opt.Engine != "" {
		planCopy.Engine = opt.Engine
	}
	if _, err := os.Lstat(opt.Out); err == nil && !opt.Force {
		return nil, &checkpoint.ExistsError{Path: opt.Out} // internal/output's, the one of every package
	}
	parent, err := architecture.Load(filepath.Join(opt.Model, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("prune: reading parent config: %w", err)
	}
	lay, err := Resolve(parent, plan)
	if err != nil {
		return nil, err
	}
	rd, err := checkpoint.Open(opt.Model)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	defer rd.Close()

	infos := rd.Tensors()
	names := make([]string, len(infos))
	shapes := make(map[string][]int, len(infos))
	byName := make(map[string]checkpoint.TensorInfo, len(infos))
	for i, t := range infos {
		names[i] = t.Name
		shapes[t.Name] = intShape(t.Shape)
		byName[t.Name] = t
	}
	if err := checkAgainstConfig(parent, infos, "parent"); err != nil {
		return nil, err
	}
	maps, err := lay.Map(names, shapes)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	childInfos := make([]checkpoint.TensorInfo, len(maps))
	for i, m := range maps {
		childInfos[i] = checkpoint.TensorInfo{Name: m.Dst, DType: byName[m.Src].DType, Shape: int64Shape(m.Shape)}
	}
	if err := checkAgainstConfig(lay.Child, childInfos, "child"); err != nil {
		return nil, fmt.Errorf("prune: internal error, the sliced tensors disagree with the child config: %w", err)
	}
	aux, err := checkpoint.AuxFiles(opt.Model)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	deci := lay.Format == FormatDeciLM // a DeciLM parent's children are too (Resolve)
	copyNames := auxToCopy(aux, deci)
	cfg, err := childConfig(lay, deciLMAutoMap(deci, copyNames, opt.ExtraFiles))
	if err != nil {
		return nil, fmt.Errorf("prune: writing child config: %w", err)
	}
	engines, err := export.ParseEngines(plan.Engine)
	if err != nil {
		return nil, fmt.Errorf("prune: engine: %w", err)
	}
	// The engines' rules that the config alone decides are checked before
	// any weight is written.
	for _, e := range engines {
		r, err := export.ValidateConfigWith(cfg, e, export.Options{TP: opt.TP})
		if err != nil {
			return nil, fmt.Errorf("prune: %w", err)
		}
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("prune: the child would not load in %s, nothing written: %w", e, err)
		}
	}

	out, err := checkpoint.NewOutputDir(opt.Out, opt.Force)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	defer func() {
		if err != nil {
			out.Abort()
		}
	}()
	out.Watch(ctx)
	tmp := out.Path()

	// Shard like the parent: each child tensor goes to the file its parent
	// tensor came from; files left empty are dropped and the rest renumbered.
	files := rd.Files()
	pos := make(map[string]int, len(files))
	for i, f := range files {
		pos[f] = i
	}
	groups := make([][]TensorMap, len(files))
	for _, m := range maps {
		i := pos[rd.Shard(m.Src)]
		groups[i] = append(groups[i], m)
	}
	var sp checkpoint.ShardPlan
	var order []TensorMap
	var kept [][]TensorMap
	for _, g := range groups {
		if len(g) > 0 {
			kept = append(kept, g)
		}
	}
	if len(kept) == 0 {
		return nil, errors.New("prune: the plan leaves no tensor")
	}
	var total int64
	for i, g := range kept {
		n := len(kept)
		if !rd.Sharded() {
			n = 1
		}
		sp.Files = append(sp.Files, checkpoint.ShardName(i, n))
		var specs []checkpoint.TensorSpec
		for _, m := range g {
			s := checkpoint.TensorSpec{Name: m.Dst, DType: byName[m.Src].DType, Shape: int64Shape(m.Shape)}
			specs = append(specs, s)
			total += s.Size()
		}
		sp.Tensors = append(sp.Tensors, specs)
		order = append(order, g...)
	}
	meta, err := fileMetadata(files[0])
	if err != nil {
		return nil, err
	}
	src := &sources{}
	defer src.close()
	w, err := checkpoint.CreateSharded(tmp, sp, meta)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	task := progress.Start(opt.Progress, progress.Event{Stage: "prune", Total: total, Unit: progress.Bytes})
	res = &Result{Dir: opt.Out, Layout: lay, Files: sp.Files}
	for _, m := range order {
		if err := ctx.Err(); err != nil {
			w.Abort()
			return nil, err
		}
		n, err := writeTensor(src, w, byName[m.Src], m)
		if err != nil {
			w.Abort()
			return nil, fmt.Errorf("prune: %w", err)
		}
		res.Tensors++
		res.Bytes += n
		task.Add(n)
	}
	if err := ctx.Err(); err != nil {
		w.Abort()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "config.json"), cfg, 0o666); err != nil { //output:inside
		return nil, fmt.Errorf("prune: %w", err)
	}
	if err := checkpoint.CopyFiles(tmp, opt.Model, copyNames); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	if deci {
		if err := remotecode.WriteDeciLM(tmp); err != nil {
			return nil, fmt.Errorf("prune: %w", err)
		}
	}
	for _, f := range opt.ExtraFiles {
		if err := checkpoint.CopyFiles(tmp, filepath.Dir(f), []string{filepath.Base(f)}); err != nil {
			return nil, fmt.Errorf("prune: adding %s: %w", f, err)
		}
	}
	validate := opt.CheckChild
	if validate == nil {
		validate = func(dir, engine string) error {
			r, err := export.ValidateDirWith(dir, engine, export.Options{TP: opt.TP})
			if err != nil {
				return err
			}
			return r.Err()
		}
	}
	if len(engines) == 0 {
		if err := validate(tmp, ""); err != nil {
			return nil, fmt.Errorf("prune: the child does not match its config, nothing written: %w", err)
		}
	}
	for _, e := range engines {
		if err := validate(tmp, e); err != nil {
			return nil, fmt.Errorf("prune: the child does not load in %s, nothing written: %w", e, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := out.Commit(); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	return res, nil
}

// sources opens the parent's safetensors files for positioned reads. The
// pruner reads tensor data with pread (and, for tensors copied whole,
// copy_file_range through os.File.ReadFrom) rather than through the reader's
// memory map, so that the pages it streams through never count towards the
// process's resident memory.
type sources struct {
	files map[string]*os.File
	buf   []byte // source chunk buffer reused by every tensor
}

func (s *sources) file(path string) (*os.File, error) {
	if f, ok := s.files[path]; ok {
		return f, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if s.files == nil {
		s.files = map[string]*os.File{}
	}
	s.files[path] = f
	return f, nil
}

func (s *sources) close() {
	for _, f := range s.files {
		f.Close()
	}
}

// writeTensor streams one child tensor into w and returns its size.
func writeTensor(src *sources, w *checkpoint.ShardedWriter, t checkpoint.TensorInfo, m TensorMap) (int64, error) {
	f, err := src.file(t.File)
	if err != nil {
		return 0, err
	}
	shape := intShape(t.Shape)
	if !m.Zero && m.Sel.IsIdentity(shape) {
		// A whole tensor: let the kernel copy it (copy_file_range).
		if _, err := f.Seek(t.Offset, io.SeekStart); err != nil {
			return 0, fmt.Errorf("seeking to tensor %s at byte offset %d of %s: %w", t.Name, t.Offset, t.File, err)
		}
		if err := w.WriteTensorFrom(m.Dst, f); err != nil {
			return 0, fmt.Errorf("%w (tensor %s at byte offset %d of %s)", err, t.Name, t.Offset, t.File)
		}
		return t.Size, nil
	}
	g, err := newGatherReader(io.NewSectionReader(f, t.Offset, t.Size), t.Name, shape, t.DType.Size(), m.Sel, m.Zero, &src.buf)
	if err != nil {
		return 0, fmt.Errorf("tensor %s in %s: %w", t.Name, t.File, err)
	}
	if err := w.WriteTensorFrom(m.Dst, g); err != nil {
		return 0, fmt.Errorf("%w (tensor %s at byte offset %d of %s)", err, t.Name, t.Offset, t.File)
	}
	return g.total, nil
}

// fileMetadata reads the __metadata__ of one safetensors file.
func fileMetadata(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	h, err := checkpoint.ReadHeader(f, st.Size(), path)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	return h.Metadata, nil
}

func intShape(s []int64) []int {
	out := make([]int, len(s))
	for i, d := range s {
		out[i] = int(d)
	}
	return out
}

func int64Shape(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

// checkAgainstConfig compares checkpoint tensors with the ones the model's
// config implies and names every missing or mis-shaped tensor with its file
// and byte offset. Extra rotary inv_freq buffers are tolerated, and so is a
// stored lm_head beside tied embeddings.
func checkAgainstConfig(m *architecture.Model, got []checkpoint.TensorInfo, which string) error {
	have := make(map[string]checkpoint.TensorInfo, len(got))
	for _, t := range got {
		have[t.Name] = t
	}
	want := m.Tensors()
	wantSet := make(map[string]bool, len(want))
	var problems []string
	for _, w := range want {
		wantSet[w.Name] = true
		t, ok := have[w.Name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("tensor %s is missing (the %s config implies shape %v)", w.Name, which, w.Shape))
		case !slices.Equal(t.Shape, w.Shape):
			where := ""
			if t.File != "" {
				where = fmt.Sprintf(" in %s at byte offset %d", t.File, t.Offset)
			}
			problems = append(problems, fmt.Sprintf("tensor %s%s has shape %v but the %s config implies %v", w.Name, where, t.Shape, which, w.Shape))
		}
	}
	tiedHead := ""
	if m.TiedEmbeddings {
		tiedHead = m.LMHead().Name // a tied checkpoint may still hold it
	}
	for _, t := range got {
		if wantSet[t.Name] || strings.HasSuffix(t.Name, "rotary_emb.inv_freq") || t.Name == tiedHead {
			continue
		}
		problems = append(problems, fmt.Sprintf("tensor %s (shape %v) is not part of the %s %s as configured", t.Name, t.Shape, which, m.Arch))
	}
	if len(problems) == 0 {
		return nil
	}
	if len(problems) > 20 {
		problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
	}
	return &ShapeError{Which: which, Problems: problems}
}

// ShapeError reports checkpoint tensors that disagree with the config.
type ShapeError struct {
	Which    string // "parent" or "child"
	Problems []string
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("%s checkpoint does not match its config.json:\n  %s", e.Which, strings.Join(e.Problems, "\n  "))
}
