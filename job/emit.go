package job

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/architecture"
	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/dataset"
	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/torchref"
	"github.com/autocompress/autocompress/train"
)

// EmitConfig describes a job to write: what to run, on what, with which
// recipe. Emit turns it into a job directory.
type EmitConfig struct {
	Kind   Kind
	Engine string
	Dir    string // the job directory to write
	Force  bool   // replace an existing job directory that holds another job

	Teacher, Student string // distill, proxy: checkpoint directories
	Model            string // importance, eval: the checkpoint directory

	// Data is the training text (distill) or the scored text (importance,
	// eval); EvalData the held-out text (distill, proxy). The forms of
	// distill.Config's Data.
	Data, EvalData []string
	Assets         string

	// Recipe holds the settings; Steps, MicroBatch and derived defaults are
	// filled by Emit. Rows bounds the rows of importance, eval and proxy
	// (default 64).
	Recipe Recipe
	Rows   int

	WorldSize       int
	CheckpointEvery int
	Slurm           SlurmResources

	Progress progress.Func `json:"-"`
}

// SlurmResources is what launch.sbatch asks Slurm for.
type SlurmResources struct {
	Nodes       int    `json:"nodes"`
	GPUsPerNode int    `json:"gpus_per_node"`
	Partition   string `json:"partition,omitempty"`
	Account     string `json:"account,omitempty"`
	Time        string `json:"time"`
}

// EnsureDefaults fills unset fields with native distill's defaults and
// returns c.
func (c *EmitConfig) EnsureDefaults() *EmitConfig {
	r := &c.Recipe
	if r.SeqLen == 0 {
		r.SeqLen = 128
	}
	if r.Batch == 0 {
		r.Batch = 8
	}
	if c.WorldSize == 0 {
		c.WorldSize = 1
	}
	if c.Rows == 0 {
		c.Rows = 64
	}
	if c.Kind == Distill {
		if r.LR == 0 {
			r.LR = 1e-3
		}
		if r.MinLR == 0 {
			r.MinLR = r.LR / 10
		}
		if r.Schedule == "" {
			r.Schedule = "cosine"
		}
		if r.Beta1 == 0 {
			r.Beta1 = 0.9
		}
		if r.Beta2 == 0 {
			r.Beta2 = 0.95
		}
		if r.Eps == 0 {
			r.Eps = 1e-8
		}
		if r.Temperature == 0 {
			r.Temperature = 1
		}
		if r.KDWeight == 0 && r.CEWeight == 0 {
			r.KDWeight = 1
		}
		if r.EvalRows == 0 {
			r.EvalRows = 64
		}
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = 50
	}
	if c.Assets == "" {
		c.Assets = "."
	}
	s := &c.Slurm
	if s.Nodes == 0 {
		s.Nodes = 1
	}
	if s.GPUsPerNode == 0 {
		s.GPUsPerNode = max(1, c.WorldSize/s.Nodes)
	}
	if s.Time == "" {
		s.Time = "04:00:00"
	}
	return c
}

// Validate reports the first problem with c (after EnsureDefaults) that
// can be seen before reading any file.
func (c *EmitConfig) Validate() error {
	e, ok := LookupEngine(c.Engine)
	switch {
	case !ok:
		return fmt.Errorf("job: engine %q: want one of %s (native runs in this binary, not as a job)", c.Engine, strings.Join(EngineNames(), ", "))
	case !e.Runs(c.Kind):
		return fmt.Errorf("job: engine %s runs %s jobs only, not %s: choose engine torch for it", e.Name, kindList(e.Kinds), c.Kind)
	case c.Dir == "":
		return errors.New("job: no job directory given")
	case c.Kind.pair() && (c.Teacher == "" || c.Student == ""):
		return fmt.Errorf("job: a %s job needs a teacher and a student", c.Kind)
	case !c.Kind.pair() && c.Model == "":
		return fmt.Errorf("job: a %s job needs a model", c.Kind)
	case len(c.Data) == 0 && c.Kind != Proxy:
		return errors.New("job: no data given")
	case c.Kind == Proxy && len(c.EvalData) == 0:
		return errors.New("job: a proxy job needs held-out data")
	case c.WorldSize < 1:
		return fmt.Errorf("job: world size %d: want at least 1 rank", c.WorldSize)
	case c.Recipe.Batch%c.WorldSize != 0:
		return fmt.Errorf("job: a batch of %d sequences does not divide among %d ranks: choose a multiple of %d (e.g. %d) or another world size", c.Recipe.Batch, c.WorldSize, c.WorldSize, (c.Recipe.Batch/c.WorldSize+1)*c.WorldSize)
	case c.Kind == Distill && c.Recipe.Tokens < 1:
		return fmt.Errorf("job: tokens %d: a distill job needs a positive number of training tokens", c.Recipe.Tokens)
	case c.Slurm.Nodes < 1 || c.WorldSize%c.Slurm.Nodes != 0:
		return fmt.Errorf("job: %d ranks do not divide among %d Slurm nodes", c.WorldSize, c.Slurm.Nodes)
	case c.Rows < 1:
		return fmt.Errorf("job: rows %d: want at least 1", c.Rows)
	}
	return engineRecipe(e.Name, c.Recipe, c.Kind)
}

func kindList(ks []Kind) string {
	var s []string
	for _, k := range ks {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// engineRecipe refuses recipe settings an engine's own recipe cannot say.
func engineRecipe(engine string, r Recipe, k Kind) error {
	if k != Distill {
		return nil
	}
	switch {
	case engine == "automodel" && r.TopK > 0:
		return errors.New("job: AutoModel's KDLoss has no top-k (it takes temperature and fp32_upcast only): use top-k 0 or engine torch")
	case engine == "megatron-bridge" && r.TopK > 0:
		return errors.New("job: Megatron-Bridge's distill.py takes no top-k: use top-k 0 or engine torch")
	case engine == "megatron-bridge" && r.Temperature != 1:
		return fmt.Errorf("job: Megatron-Bridge's distill.py takes no temperature (ModelOpt's default, 1, applies): use temperature 1 or engine torch or automodel, not %g", r.Temperature)
	}
	return nil
}

// role is a model of the request: its contract role and directory.
type role struct{ name, dir string }

// requestFile records what a job directory was emitted from, so that the
// same request again finds its job (and resumes it) and another is refused.
const requestFile = "request.json"

// Emitted is a written (or found) job directory.
type Emitted struct {
	Dir      string
	Contract *Contract
	// Existing is true when Dir already held this very job (the same
	// request over the same files): nothing was written, and launching it
	// again resumes it.
	Existing bool
}

// Emit writes the job directory c.Dir: the contract, the models, the
// tokenizer, the data shards, the engine's own recipe, requirements.txt,
// launch.sh and launch.sbatch. Everything that can be refused is refused
// before a file is written: a model the engine cannot take, data that does
// not pack, a batch the ranks do not divide. A directory that holds the
// same job already is returned as it is (Existing); another job there is
// an *output.ExistsError unless c.Force.
func Emit(ctx context.Context, c EmitConfig) (*Emitted, error) {
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	eng, _ := LookupEngine(c.Engine)
	note := func(f string, a ...any) { c.Progress.Notef("job", f, a...) }

	// Models first: their shapes and what the engine takes.
	var roles []role
	if c.Kind.pair() {
		roles = []role{{"teacher", c.Teacher}, {"student", c.Student}}
	} else {
		roles = []role{{"model", c.Model}}
	}
	shapes := map[string]Shape{}
	var archs []*architecture.Model
	for _, r := range roles {
		a, err := architecture.Load(r.dir)
		if err != nil {
			return nil, fmt.Errorf("job: %s: %w", r.name, err)
		}
		s, err := ShapeOf(a)
		if err != nil {
			return nil, fmt.Errorf("job: %s: %w", r.name, err)
		}
		if err := eng.RepresentFor(c.Kind, r.name, s); err != nil {
			return nil, err
		}
		if eng.Name == "torch" {
			if err := denseWeights(r.name, r.dir); err != nil {
				return nil, err
			}
		}
		shapes[r.name] = s
		archs = append(archs, a)
	}
	req, err := requestHash(c, roles)
	if err != nil {
		return nil, err
	}
	old, err := existing(c.Dir, req)
	switch {
	case old != nil:
		return old, nil
	case err != nil && !(c.Force && errors.As(err, new(*output.ExistsError))):
		return nil, err
	}
	return emitFresh(ctx, c, eng, roles, shapes, archs, req, note)
}

// denseWeights refuses a checkpoint the torch trainer cannot read (its
// acio.py reads F32, BF16 and F16 tensors only): MXFP4 blocks (gpt-oss's
// released experts, *_blocks and *_scales) with what to do, and any other
// dtype.
func denseWeights(role, dir string) error {
	r, err := checkpoint.Open(dir)
	if err != nil {
		return fmt.Errorf("job: %s: %w", role, err)
	}
	defer r.Close()
	for _, t := range r.Tensors() {
		switch {
		case strings.HasSuffix(t.Name, "_blocks") || strings.HasSuffix(t.Name, "_scales"):
			return &RepresentError{"torch", role, fmt.Sprintf("tensor %s is an MXFP4-quantized block: the reference trainer reads dense bf16, float16 or float32 weights; dequantize first (e.g. load with transformers' Mxfp4Config(dequantize=True) and save_pretrained in bf16)", t.Name)}
		case t.DType != checkpoint.F32 && t.DType != checkpoint.BF16 && t.DType != checkpoint.F16:
			return &RepresentError{"torch", role, fmt.Sprintf("tensor %s is %s: the reference trainer reads F32, BF16 or F16 tensors; convert the checkpoint first", t.Name, t.DType)}
		}
	}
	return nil
}

// existing returns the job at dir when it was emitted from req, nil when
// dir does not exist, and an *output.ExistsError when it holds anything
// else.
func existing(dir, req string) (*Emitted, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	b, err := os.ReadFile(filepath.Join(dir, requestFile))
	var r struct {
		Request string `json:"request"`
	}
	if err == nil && json.Unmarshal(b, &r) == nil && r.Request == req {
		c, err := Load(dir)
		if err != nil {
			return nil, err
		}
		return &Emitted{Dir: dir, Contract: c, Existing: true}, nil
	}
	return nil, &output.ExistsError{Path: dir}
}

// requestHash identifies an emit request: its settings and the files of
// its models (checkpoint.HashFiles over each directory).
func requestHash(c EmitConfig, roles []role) (string, error) {
	h := sha256.New()
	settings := c
	settings.Dir, settings.Force, settings.Progress = "", false, nil
	settings.Teacher, settings.Student, settings.Model = "", "", ""
	b, err := json.Marshal(settings)
	if err != nil {
		return "", fmt.Errorf("job: %w", err)
	}
	h.Write(b)
	for _, r := range roles {
		names, err := modelFiles(r.dir)
		if err != nil {
			return "", err
		}
		id, err := checkpoint.HashFiles(os.DirFS(r.dir), names)
		if err != nil {
			return "", fmt.Errorf("job: %s: %w", r.name, err)
		}
		fmt.Fprintf(h, "%s=%s\n", r.name, id)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// modelFiles lists the regular files directly in a checkpoint directory
// (config, weights, tokenizer), sorted.
func modelFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func emitFresh(ctx context.Context, c EmitConfig, eng EngineInfo, roles []role, shapes map[string]Shape, archs []*architecture.Model, req string, note func(string, ...any)) (*Emitted, error) {
	// Data, before anything is written.
	r := c.Recipe
	var trainRows, validRows [][]int32
	if c.Kind.pair() {
		dc := distill.Config{Teacher: c.Teacher, Student: c.Student, Data: c.Data, EvalData: c.EvalData, Assets: c.Assets}
		dc.Train.SeqLen, dc.Train.Batch, dc.Train.EvalRows = r.SeqLen, r.Batch, r.EvalRows
		if c.Kind == Proxy {
			dc.Data, dc.Train.EvalRows = c.EvalData, c.Rows
		}
		rows, evalRows, err := distill.Data(ctx, dc)
		if err != nil {
			return nil, fmt.Errorf("job: %w", err)
		}
		if c.Kind == Distill {
			per := int64(r.Batch) * int64(r.SeqLen)
			r.Steps = int((r.Tokens + per - 1) / per)
			for _, i := range train.RowOrder(len(rows), r.Seed, r.Steps*r.Batch) {
				trainRows = append(trainRows, rows[i])
			}
			validRows = evalRows
			if r.Warmup == 0 {
				r.Warmup = max(1, r.Steps/20)
			}
		} else {
			validRows = evalRows[:min(len(evalRows), c.Rows)]
		}
	} else {
		o := dataset.ForModel(archs[0], c.Model)
		o.SeqLen, o.MaxRows, o.Assets = r.SeqLen, c.Rows, c.Assets
		p, err := dataset.Rows(ctx, c.Data, o)
		if err != nil {
			return nil, fmt.Errorf("job: data: %w", err)
		}
		validRows = p.Rows
		r.Tokens, r.Steps = 0, 0
	}
	r.MicroBatch = r.Batch / c.WorldSize
	if c.Kind != Distill {
		r.EvalRows = 0
	}

	out, err := output.NewDir(c.Dir, true)
	if err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	defer out.Abort()
	dir := out.Path()
	ct := &Contract{Version: Version, Kind: c.Kind, Engine: c.Engine, Recipe: r, WorldSize: c.WorldSize,
		CheckpointEvery: c.CheckpointEvery, Outputs: DefaultOutputs(c.Kind)}
	if c.Kind != Distill {
		ct.CheckpointEvery = 0
	}
	for _, ro := range roles {
		note("copying the %s from %s", ro.name, ro.dir)
		if err := copyModel(ro.dir, filepath.Join(dir, ro.name)); err != nil {
			return nil, err
		}
		h, err := HashTree(dir, ro.name, true)
		if err != nil {
			return nil, err
		}
		m := &Model{Files: Files{Path: ro.name, SHA256: h}, Shape: shapes[ro.name]}
		switch ro.name {
		case "teacher":
			ct.Teacher = m
		case "student":
			ct.Student = m
		default:
			ct.Model = m
		}
	}
	tokSrc := roles[len(roles)-1].dir
	if err := os.MkdirAll(filepath.Join(dir, "tokenizer"), 0o755); err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	for _, n := range []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
		err := copyFile(filepath.Join(tokSrc, n), filepath.Join(dir, "tokenizer", n))
		if errors.Is(err, os.ErrNotExist) && n != "tokenizer.json" {
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	th, err := HashTree(dir, "tokenizer", true)
	if err != nil {
		return nil, err
	}
	ct.Tokenizer = Files{Path: "tokenizer", SHA256: th}

	note("writing %d training and %d held-out rows of %d tokens", len(trainRows), len(validRows), r.SeqLen+1)
	d, err := writeData(dir, eng.Shards, shapes[roles[len(roles)-1].name].Vocab, r.SeqLen, trainRows, validRows)
	if err != nil {
		return nil, err
	}
	ct.Data = d
	if err := ct.Validate(); err != nil {
		return nil, fmt.Errorf("job: the contract built is not valid (a bug): %w", err)
	}
	if err := writeEngine(dir, ct, eng, c.Slurm); err != nil {
		return nil, err
	}
	if err := ct.Save(dir); err != nil {
		return nil, err
	}
	rb, _ := json.MarshalIndent(map[string]string{"request": req}, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, requestFile), append(rb, '\n'), 0o644); err != nil { //output:inside
		return nil, fmt.Errorf("job: %w", err)
	}
	if err := out.Commit(); err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	note("wrote the %s job for engine %s to %s", c.Kind, c.Engine, c.Dir)
	return &Emitted{Dir: c.Dir, Contract: ct}, nil
}

// writeData writes the shards (one train, one valid) in the engine's
// format and returns the contract's data section.
func writeData(dir, format string, vocab, seqLen int, trainRows, validRows [][]int32) (Data, error) {
	d := Data{Format: format, SeqLen: seqLen, TrainRows: len(trainRows), ValidRows: len(validRows), SHA256: map[string]string{}}
	d.DType = ShardDType(vocab)
	if format == ShardMegatron && d.DType == "uint32" {
		d.DType = "int32"
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return d, fmt.Errorf("job: %w", err)
	}
	for _, s := range []struct {
		name string
		rows [][]int32
		list *[]string
	}{{"data/train_000", trainRows, &d.Train}, {"data/valid_000", validRows, &d.Valid}} {
		if len(s.rows) == 0 {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(s.name))
		var err error
		name := s.name
		if format == ShardMegatron {
			err = WriteIndexed(p, s.rows, d.DType)
		} else {
			name += ".bin"
			err = WriteShard(p+".bin", s.rows, d.DType)
		}
		if err != nil {
			return d, err
		}
		*s.list = append(*s.list, name)
		for _, f := range ShardFiles(format, name) {
			h, err := HashFile(dir, f)
			if err != nil {
				return d, fmt.Errorf("job: %w", err)
			}
			d.SHA256[f] = h
		}
	}
	return d, nil
}

// copyModel copies the regular files of a checkpoint directory (hard
// links where the file system allows: checkpoints are large and never
// written in place).
func copyModel(src, dst string) error {
	names, err := modelFiles(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	for _, n := range names {
		if err := os.Link(filepath.Join(src, n), filepath.Join(dst, n)); err == nil {
			continue
		}
		if err := copyFile(filepath.Join(src, n), filepath.Join(dst, n)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("job: %w", err)
	}
	defer in.Close()
	o, err := os.Create(dst) //output:inside
	if err != nil {
		return fmt.Errorf("job: %w", err)
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return fmt.Errorf("job: copying %s: %w", src, err)
	}
	if err := o.Close(); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	return nil
}

// writeEngine writes the engine's own files: the trainer or the recipe,
// the glue, requirements.txt, launch.sh and launch.sbatch.
func writeEngine(dir string, c *Contract, e EngineInfo, s SlurmResources) error {
	files := map[string]string{}
	var entry string
	switch e.Name {
	case "torch":
		if err := torchref.Write(dir); err != nil {
			return fmt.Errorf("job: %w", err)
		}
		entry = `"$PYTHON" ` + torchref.Entry + " " + ContractFile
	case "automodel":
		files[e.Config] = autoModelRecipe(c)
		files["glue/automodel_kd.py"] = autoModelEntry
		files["glue/result.py"] = glueResult
		entry = `"$PYTHON" glue/automodel_kd.py -c ` + e.Config
	case "megatron-bridge":
		files[e.Config] = megatronScript(c)
		files["glue/result.py"] = glueResult
		entry = "bash " + e.Config
	}
	files["requirements.txt"] = requirements(e)
	files["launch.sh"] = launchScript(c, e, entry)
	files["launch.sbatch"] = sbatchScript(c, e, entry, s)
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("job: %w", err)
		}
		mode := os.FileMode(0o644)
		if filepath.Ext(name) == ".sh" || filepath.Ext(name) == ".sbatch" {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil { //output:inside
			return fmt.Errorf("job: %w", err)
		}
	}
	return nil
}
