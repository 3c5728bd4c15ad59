package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/autocompress/autocompress/internal/output"
)

// ShardPlan assigns tensors to output files.
type ShardPlan struct {
	Files   []string       // file names relative to the output directory
	Tensors [][]TensorSpec // per file, in write order
}

// ShardName returns the HuggingFace name of shard i (0-based) of n:
// "model-00001-of-00003.safetensors", or "model.safetensors" when n is 1.
func ShardName(i, n int) string {
	if n == 1 {
		return SingleFileName
	}
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
}

// PlanShards splits tensors, in order, into files of at most maxShardBytes
// of tensor data each (a tensor larger than the limit gets a file of its
// own), named as HuggingFace does. maxShardBytes <= 0 means one file.
func PlanShards(tensors []TensorSpec, maxShardBytes int64) ShardPlan {
	var groups [][]TensorSpec
	var cur []TensorSpec
	var size int64
	for _, t := range tensors {
		if maxShardBytes > 0 && len(cur) > 0 && size+t.Size() > maxShardBytes {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, t)
		size += t.Size()
	}
	if len(cur) > 0 || len(groups) == 0 {
		groups = append(groups, cur)
	}
	return namePlan(groups)
}

func namePlan(groups [][]TensorSpec) ShardPlan {
	p := ShardPlan{Tensors: groups}
	for i := range groups {
		p.Files = append(p.Files, ShardName(i, len(groups)))
	}
	return p
}

// PlanLike shards tensors the way r is sharded: each tensor goes to the
// shard that holds the same name in r (a tensor r lacks joins the shard of
// the tensor before it, or the first shard). Shards left empty are dropped
// and the rest renumbered; a single-file input gives a single-file plan.
// Within a shard, tensors keep the order of the tensors argument.
func PlanLike(r *Reader, tensors []TensorSpec) ShardPlan {
	files := r.Files()
	pos := make(map[string]int, len(files))
	for i, f := range files {
		pos[f] = i
	}
	groups := make([][]TensorSpec, len(files))
	cur := 0
	for _, t := range tensors {
		if f := r.Shard(t.Name); f != "" {
			cur = pos[f]
		}
		groups[cur] = append(groups[cur], t)
	}
	var kept [][]TensorSpec
	for _, g := range groups {
		if len(g) > 0 {
			kept = append(kept, g)
		}
	}
	if len(kept) == 0 {
		kept = [][]TensorSpec{nil}
	}
	return namePlan(kept)
}

// TotalSize returns the sum of the plan's tensor sizes in bytes.
func (p ShardPlan) TotalSize() int64 {
	var n int64
	for _, g := range p.Tensors {
		for _, t := range g {
			n += t.Size()
		}
	}
	return n
}

// WeightMap returns tensor name → file name.
func (p ShardPlan) WeightMap() map[string]string {
	m := map[string]string{}
	for i, g := range p.Tensors {
		for _, t := range g {
			m[t.Name] = p.Files[i]
		}
	}
	return m
}

type indexOut struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// WriteIndex writes dir/model.safetensors.index.json: {"metadata":
// {"total_size": totalSize, ...metadata}, "weight_map": weightMap}, keys
// sorted, written to a temporary file and renamed into place.
func WriteIndex(dir string, weightMap map[string]string, totalSize int64, metadata map[string]string) error {
	md := map[string]any{}
	for k, v := range metadata {
		md[k] = v
	}
	md["total_size"] = totalSize
	b, err := json.MarshalIndent(indexOut{Metadata: md, WeightMap: weightMap}, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint: encoding index: %w", err)
	}
	if err := output.WriteFile(filepath.Join(dir, IndexFileName), append(b, '\n'), true); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// ShardedWriter writes a checkpoint split over the files of a ShardPlan,
// plus the index when there is more than one file. Tensors of one shard must
// be written in plan order; shards may be interleaved.
type ShardedWriter struct {
	dir     string
	plan    ShardPlan
	writers []*Writer
	shardOf map[string]int
	md      map[string]string
	done    bool
}

// CreateSharded starts writing plan into dir (which must exist). metadata
// goes into every file's __metadata__ and into the index.
func CreateSharded(dir string, plan ShardPlan, metadata map[string]string) (*ShardedWriter, error) {
	if len(plan.Files) != len(plan.Tensors) || len(plan.Files) == 0 {
		return nil, fmt.Errorf("checkpoint: shard plan has %d files and %d tensor groups", len(plan.Files), len(plan.Tensors))
	}
	var all []TensorSpec
	for _, g := range plan.Tensors {
		all = append(all, g...)
	}
	if err := validateSpecs(all); err != nil {
		return nil, err
	}
	w := &ShardedWriter{dir: dir, plan: plan, shardOf: map[string]int{}, md: metadata}
	for i, f := range plan.Files {
		sw, err := Create(filepath.Join(dir, f), plan.Tensors[i], metadata)
		if err != nil {
			w.Abort()
			return nil, err
		}
		w.writers = append(w.writers, sw)
		for _, t := range plan.Tensors[i] {
			w.shardOf[t.Name] = i
		}
	}
	return w, nil
}

func (w *ShardedWriter) writer(name string) (*Writer, error) {
	i, ok := w.shardOf[name]
	if !ok {
		return nil, fmt.Errorf("checkpoint: tensor %q is not in the shard plan: %w", name, ErrNotFound)
	}
	return w.writers[i], nil
}

// WriteTensor writes a tensor's raw data to its shard.
func (w *ShardedWriter) WriteTensor(name string, data []byte) error {
	sw, err := w.writer(name)
	if err != nil {
		return err
	}
	return sw.WriteTensor(name, data)
}

// WriteTensorFrom streams a tensor's data from r to its shard.
func (w *ShardedWriter) WriteTensorFrom(name string, r io.Reader) error {
	sw, err := w.writer(name)
	if err != nil {
		return err
	}
	return sw.WriteTensorFrom(name, r)
}

// WriteFloat32 encodes src as the tensor's dtype and writes it.
func (w *ShardedWriter) WriteFloat32(name string, src []float32) error {
	sw, err := w.writer(name)
	if err != nil {
		return err
	}
	return sw.WriteFloat32(name, src)
}

// Close finishes every shard and writes the index. If a tensor is missing
// no shard is written; if a later step fails, shards already renamed into
// place are removed (write into a fresh directory such as OutputDir.Path).
func (w *ShardedWriter) Close() error {
	if w.done {
		return errors.New("checkpoint: sharded writer already closed")
	}
	w.done = true
	for _, sw := range w.writers {
		if sw.next < len(sw.specs) || sw.err != nil {
			err := sw.Close() // reports the missing tensor and discards the file
			w.abortFrom(0)
			return err
		}
	}
	for i, sw := range w.writers {
		if err := sw.Close(); err != nil {
			w.abortFrom(i + 1)
			w.removeDone(i)
			return err
		}
	}
	if len(w.writers) > 1 {
		if err := WriteIndex(w.dir, w.plan.WeightMap(), w.plan.TotalSize(), w.md); err != nil {
			w.removeDone(len(w.writers))
			return err
		}
	}
	return nil
}

func (w *ShardedWriter) abortFrom(i int) {
	for _, sw := range w.writers[i:] {
		sw.Abort()
	}
}

func (w *ShardedWriter) removeDone(n int) {
	for _, sw := range w.writers[:n] {
		os.Remove(sw.path)
	}
}

// Abort discards every shard.
func (w *ShardedWriter) Abort() {
	w.done = true
	w.abortFrom(0)
}

// Plan returns the plan being written.
func (w *ShardedWriter) Plan() ShardPlan { return w.plan }
