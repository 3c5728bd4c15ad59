package checkpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/checkpoint/testutil"
)

var tinyLlama = testutil.Llama{Vocab: 64, Hidden: 16, Intermediate: 40, Heads: 4, KVHeads: 2, Layers: 4}

// TestShardedOutputLikeInput reads a 3-shard checkpoint, drops one layer
// (as a depth-pruner would) and writes the rest sharded like the input; the
// output must keep every tensor in the same shard, carry the metadata and
// an index whose weight_map and total_size match, and hold identical bytes.
func TestShardedOutputLikeInput(t *testing.T) {
	specs := testutil.LlamaSpecs(tinyLlama, checkpoint.BF16)
	src := testutil.WriteTB(t, specs, testutil.Options{Seed: 3, Shards: 3,
		Files: map[string][]byte{"config.json": testutil.LlamaConfig(tinyLlama, checkpoint.BF16), "tokenizer.json": []byte("{}")}})
	r, err := checkpoint.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Sharded() || len(r.Files()) != 3 {
		t.Fatalf("sharded=%v files=%v", r.Sharded(), r.Files())
	}
	md := r.Metadata()
	if md["total_size"] != strconv.FormatInt(r.TotalSize(), 10) || md["format"] != "pt" {
		t.Errorf("metadata %v, total size %d", md, r.TotalSize())
	}

	var keep []checkpoint.TensorSpec
	for _, ti := range r.Tensors() {
		if !strings.HasPrefix(ti.Name, "model.layers.2.") {
			keep = append(keep, ti.Spec())
		}
	}
	plan := checkpoint.PlanLike(r, keep)
	out, err := checkpoint.NewOutputDir(filepath.Join(t.TempDir(), "pruned"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Abort()
	w, err := checkpoint.CreateSharded(out.Path(), plan, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range keep {
		sec, err := r.Section(s.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTensorFrom(s.Name, sec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	aux, err := checkpoint.AuxFiles(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.CopyFiles(out.Path(), src, aux); err != nil {
		t.Fatal(err)
	}
	if err := out.Commit(); err != nil {
		t.Fatal(err)
	}

	o, err := checkpoint.Open(out.Dest())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if len(o.Tensors()) != len(keep) {
		t.Fatalf("%d tensors written, want %d", len(o.Tensors()), len(keep))
	}
	base := func(p string) string { return filepath.Base(p) }
	for _, s := range keep {
		if base(o.Shard(s.Name)) != base(r.Shard(s.Name)) {
			t.Errorf("%s: in %s, input had it in %s", s.Name, base(o.Shard(s.Name)), base(r.Shard(s.Name)))
		}
		a, _ := r.Bytes(s.Name)
		b, _ := o.Bytes(s.Name)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: bytes differ", s.Name)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out.Dest(), checkpoint.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	if idx.Metadata["total_size"] != float64(o.TotalSize()) || len(idx.WeightMap) != len(keep) {
		t.Errorf("index metadata %v, %d weight_map entries", idx.Metadata, len(idx.WeightMap))
	}
	for name, f := range idx.WeightMap {
		if f != base(o.Shard(name)) {
			t.Errorf("weight_map[%s] = %s, stored in %s", name, f, o.Shard(name))
		}
	}
	if got, _ := checkpoint.AuxFiles(out.Dest()); !slices.Equal(got, []string{"config.json", "tokenizer.json"}) {
		t.Errorf("aux files in output: %v", got)
	}
	if got := o.Metadata()["format"]; got != "pt" {
		t.Errorf("shard metadata format = %q", got)
	}
	ents, _ := os.ReadDir(filepath.Dir(out.Dest()))
	if len(ents) != 1 {
		t.Errorf("temporary files left beside the output: %v", ents)
	}
}

func TestPlanShards(t *testing.T) {
	mk := func(name string, n int64) checkpoint.TensorSpec {
		return checkpoint.TensorSpec{Name: name, DType: checkpoint.U8, Shape: []int64{n}}
	}
	specs := []checkpoint.TensorSpec{mk("a", 40), mk("b", 50), mk("c", 200), mk("d", 10), mk("e", 90)}
	tests := []struct {
		max  int64
		want [][]string
	}{
		{0, [][]string{{"a", "b", "c", "d", "e"}}},
		{100, [][]string{{"a", "b"}, {"c"}, {"d", "e"}}},
		{90, [][]string{{"a", "b"}, {"c"}, {"d"}, {"e"}}},
		{1000, [][]string{{"a", "b", "c", "d", "e"}}},
	}
	for _, tc := range tests {
		p := checkpoint.PlanShards(specs, tc.max)
		var got [][]string
		for _, g := range p.Tensors {
			var names []string
			for _, s := range g {
				names = append(names, s.Name)
			}
			got = append(got, names)
		}
		if !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("max %d: %v, want %v", tc.max, got, tc.want)
		}
		if n := len(p.Files); n == 1 && p.Files[0] != "model.safetensors" || n > 1 && p.Files[n-1] != checkpoint.ShardName(n-1, n) {
			t.Errorf("max %d: files %v", tc.max, p.Files)
		}
		if p.TotalSize() != 390 {
			t.Errorf("total %d", p.TotalSize())
		}
	}
	if got := checkpoint.ShardName(2, 12); got != "model-00003-of-00012.safetensors" {
		t.Errorf("ShardName = %s", got)
	}
}

// TestPlanShardsWrite writes a max-size plan and reads it back.
func TestPlanShardsWrite(t *testing.T) {
	specs := testutil.LlamaSpecs(tinyLlama, checkpoint.F32)
	plan := checkpoint.PlanShards(specs, 8<<10)
	if len(plan.Files) < 2 {
		t.Fatalf("plan has %d files", len(plan.Files))
	}
	dir := t.TempDir()
	w, err := checkpoint.CreateSharded(dir, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		if err := w.WriteFloat32(s.Name, testutil.Float32s(s, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, s := range specs {
		got, err := r.Float32(s.Name)
		if err != nil || !slices.Equal(got, testutil.Float32s(s, 1)) {
			t.Fatalf("%s: %v", s.Name, err)
		}
	}
	if len(r.Files()) != len(plan.Files) {
		t.Errorf("read %d files, planned %d", len(r.Files()), len(plan.Files))
	}
}

// TestIndexErrors corrupts a valid 2-shard checkpoint's index in the ways a
// user may meet and expects a *FormatError naming the index and the tensor.
func TestIndexErrors(t *testing.T) {
	specs := []checkpoint.TensorSpec{
		{Name: "a", DType: checkpoint.F32, Shape: []int64{2}},
		{Name: "b", DType: checkpoint.F32, Shape: []int64{3}},
	}
	tests := []struct {
		name   string
		index  string
		tensor string
		msg    string
	}{
		{"missing shard", `{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00009-of-00009.safetensors"}}`, "b", `shard "model-00009-of-00009.safetensors", which is missing`},
		{"tensor absent", `{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}}`, "c", "absent from that shard"},
		{"wrong shard", `{"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`, "a", "absent from that shard"},
		{"invalid JSON", `{"weight_map":`, "", "invalid index JSON"},
		{"no weight_map", `{"metadata":{"total_size":20}}`, "", `no "weight_map"`},
		{"path escape", `{"weight_map":{"a":"../model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`, "a", "unsafe shard path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := testutil.WriteTB(t, specs, testutil.Options{Shards: 2})
			idx := filepath.Join(dir, checkpoint.IndexFileName)
			if err := os.WriteFile(idx, []byte(tc.index), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := checkpoint.Open(dir)
			if err == nil {
				r.Close()
				t.Fatal("accepted")
			}
			var fe *checkpoint.FormatError
			if !errors.As(err, &fe) || fe.Tensor != tc.tensor || !strings.Contains(fe.Msg, tc.msg) {
				t.Fatalf("got %v, want FormatError on tensor %q with %q", err, tc.tensor, tc.msg)
			}
		})
	}
	t.Run("tensor in two shards", func(t *testing.T) {
		dir := t.TempDir()
		for i := range 2 {
			w, err := checkpoint.Create(filepath.Join(dir, checkpoint.ShardName(i, 2)), specs[:1], nil)
			if err != nil {
				t.Fatal(err)
			}
			w.WriteTensor("a", make([]byte, 8))
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		checkpoint.WriteIndex(dir, map[string]string{"a": checkpoint.ShardName(0, 2), "x": checkpoint.ShardName(1, 2)}, 16, nil)
		_, err := checkpoint.Open(dir)
		var fe *checkpoint.FormatError
		if !errors.As(err, &fe) || fe.Tensor != "a" || !strings.Contains(fe.Msg, "two shards") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestOpenDirectoryErrors(t *testing.T) {
	empty := t.TempDir()
	if _, err := checkpoint.Open(empty); err == nil || !strings.Contains(err.Error(), "no safetensors weights") {
		t.Errorf("empty dir: %v", err)
	}
	two := t.TempDir()
	for _, n := range []string{"x.safetensors", "y.safetensors"} {
		w, _ := checkpoint.Create(filepath.Join(two, n), nil, nil)
		w.Close()
	}
	if _, err := checkpoint.Open(two); err == nil || !strings.Contains(err.Error(), "several safetensors files") {
		t.Errorf("two files: %v", err)
	}
	if r, err := checkpoint.Open(filepath.Join(two, "x.safetensors")); err != nil || len(r.Tensors()) != 0 {
		t.Errorf("open one file: %v", err)
	}
	if _, err := checkpoint.Open(filepath.Join(two, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: %v", err)
	}
}

func TestWriterErrors(t *testing.T) {
	specs := []checkpoint.TensorSpec{
		{Name: "a", DType: checkpoint.F32, Shape: []int64{2}},
		{Name: "b", DType: checkpoint.BF16, Shape: []int64{3}},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	leftovers := func() []string {
		ents, _ := os.ReadDir(dir)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}

	w, err := checkpoint.Create(path, specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTensor("b", make([]byte, 6)); err == nil || !strings.Contains(err.Error(), `expected "a"`) {
		t.Errorf("out of order: %v", err)
	}
	if err := w.WriteTensor("a", make([]byte, 7)); err == nil || !strings.Contains(err.Error(), "needs 8 bytes, got 7") {
		t.Errorf("wrong size: %v", err)
	}
	if err := w.WriteTensor("a", make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), `tensor "b" was never written`) {
		t.Errorf("incomplete close: %v", err)
	}
	if l := leftovers(); len(l) != 0 {
		t.Errorf("incomplete file left behind: %v", l)
	}

	w, _ = checkpoint.Create(path, specs, nil)
	if err := w.WriteTensorFrom("a", strings.NewReader("abc")); err == nil || !strings.Contains(err.Error(), "ended after 3 of 8 bytes") {
		t.Errorf("short source: %v", err)
	}
	if err := w.Close(); err == nil {
		t.Error("close after failed write succeeded")
	}
	w, _ = checkpoint.Create(path, specs, nil)
	w.Abort()
	w.Abort()
	if l := leftovers(); len(l) != 0 {
		t.Errorf("aborted file left behind: %v", l)
	}

	bad := []struct {
		name  string
		specs []checkpoint.TensorSpec
		msg   string
	}{
		{"duplicate", []checkpoint.TensorSpec{specs[0], specs[0]}, "listed twice"},
		{"empty name", []checkpoint.TensorSpec{{DType: checkpoint.F32}}, "empty name"},
		{"reserved", []checkpoint.TensorSpec{{Name: "__metadata__", DType: checkpoint.F32}}, "reserved"},
		{"dtype", []checkpoint.TensorSpec{{Name: "x", DType: "F3"}}, "unknown dtype"},
		{"negative", []checkpoint.TensorSpec{{Name: "x", DType: checkpoint.F32, Shape: []int64{-1}}}, "negative dimension"},
	}
	for _, b := range bad {
		if _, err := checkpoint.Create(path, b.specs, nil); err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%s: %v", b.name, err)
		}
	}
	if l := leftovers(); len(l) != 0 {
		t.Errorf("files left behind: %v", l)
	}
}

func TestOutputDir(t *testing.T) {
	parent := t.TempDir()
	dest := filepath.Join(parent, "out")
	o, err := checkpoint.NewOutputDir(dest, false)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(o.Path(), "f"), []byte("1"), 0o644)
	if _, err := os.Stat(dest); err == nil {
		t.Fatal("destination visible before Commit")
	}
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	o.Abort() // no effect after Commit
	if b, _ := os.ReadFile(filepath.Join(dest, "f")); string(b) != "1" {
		t.Fatalf("committed content %q", b)
	}

	var ee *checkpoint.ExistsError
	if _, err := checkpoint.NewOutputDir(dest, false); !errors.As(err, &ee) || ee.Path != dest || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("existing destination: %v", err)
	}
	o, err = checkpoint.NewOutputDir(dest, true)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(o.Path(), "g"), []byte("2"), 0o644)
	if err := o.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dest, "f")); err == nil {
		t.Error("force did not replace the old directory")
	}

	o, _ = checkpoint.NewOutputDir(filepath.Join(parent, "other"), false)
	os.WriteFile(filepath.Join(o.Path(), "x"), []byte("3"), 0o644)
	o.Abort()
	ctx, cancel := context.WithCancel(context.Background())
	o2, _ := checkpoint.NewOutputDir(filepath.Join(parent, "cancelled"), false)
	o2.Watch(ctx)
	cancel()
	for range 1000 {
		if _, err := os.Stat(o2.Path()); err != nil {
			break
		}
		runtime.Gosched()
	}
	if err := o2.Commit(); err == nil {
		t.Error("commit after cancel succeeded")
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 1 || ents[0].Name() != "out" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("parent holds %v, want only out", names)
	}
}

func TestAuxFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
		"model.safetensors", "model-00001-of-00002.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
		"sub/modeling_x.py", ".git/HEAD", ".hidden", "original/consolidated.00.pth"} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(f), 0o644)
	}
	got, err := checkpoint.AuxFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", "generation_config.json", "sub/modeling_x.py", "tokenizer.json", "tokenizer_config.json"}
	if !slices.Equal(got, want) {
		t.Errorf("AuxFiles = %v, want %v", got, want)
	}
	dst := t.TempDir()
	if err := checkpoint.CopyFiles(dst, dir, got); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "sub", "modeling_x.py")); string(b) != "sub/modeling_x.py" {
		t.Errorf("copied content %q", b)
	}
	if err := checkpoint.CopyFiles(dst, dir, []string{"../etc/passwd"}); err == nil {
		t.Error("path escape accepted")
	}
}

// TestStreamingCopyMemory copies a 24 MiB checkpoint tensor by tensor and
// checks that the heap grows by far less than one tensor (4 MiB): the
// writer streams and the reader is memory-mapped.
func TestStreamingCopyMemory(t *testing.T) {
	var specs []checkpoint.TensorSpec
	for i := range 6 {
		specs = append(specs, checkpoint.TensorSpec{Name: "t" + strconv.Itoa(i), DType: checkpoint.F32, Shape: []int64{1024, 1024}})
	}
	src := testutil.WriteTB(t, specs, testutil.Options{})
	r, err := checkpoint.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, mode := range []string{"Section", "Bytes"} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		w, err := checkpoint.Create(filepath.Join(t.TempDir(), "copy.safetensors"), specs, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			if mode == "Section" {
				sec, _ := r.Section(s.Name)
				err = w.WriteTensorFrom(s.Name, sec)
			} else {
				var b []byte
				b, err = r.Bytes(s.Name)
				if err == nil {
					err = w.WriteTensor(s.Name, b)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s copy of 24 MiB allocated %d KiB", mode, alloc>>10)
		if alloc > 3<<20 {
			t.Errorf("%s copy allocated %d bytes; streaming should need about the 1 MiB write buffer", mode, alloc)
		}
	}
}

func TestReaderErrors(t *testing.T) {
	dir := testutil.WriteTB(t, []checkpoint.TensorSpec{{Name: "ids", DType: checkpoint.I64, Shape: []int64{2}}}, testutil.Options{})
	r, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Float32("ids"); !errors.Is(err, checkpoint.ErrUnsupported) {
		t.Errorf("Float32(I64): %v", err)
	}
	if _, err := r.Bytes("nope"); !errors.Is(err, checkpoint.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tensor: %v", err)
	}
	if r.Shard("nope") != "" {
		t.Error("Shard of a missing tensor")
	}
	if _, ok := r.Tensor("ids"); !ok {
		t.Error("Tensor(ids) not found")
	}
}

// TestConcurrentReads reads every tensor from several goroutines at once
// (run with -race).
func TestConcurrentReads(t *testing.T) {
	specs := testutil.LlamaSpecs(tinyLlama, checkpoint.F16)
	dir := testutil.WriteTB(t, specs, testutil.Options{Seed: 9, Shards: 2})
	r, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	errc := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := range specs {
				s := specs[(i+g)%len(specs)]
				got, err := r.Float32(s.Name)
				if err != nil {
					errc <- err
					return
				}
				want, _ := testutil.Values(s, 9)
				if !slices.Equal(got, want) {
					errc <- errors.New(s.Name + ": values differ")
					return
				}
			}
			errc <- nil
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// TestShardedWriterIncomplete: a missing tensor fails Close and leaves no
// shard and no index behind; Abort does the same.
func TestShardedWriterIncomplete(t *testing.T) {
	specs := testutil.LlamaSpecs(tinyLlama, checkpoint.BF16)
	plan := checkpoint.PlanShards(specs, 4<<10)
	for _, abort := range []bool{false, true} {
		dir := t.TempDir()
		w, err := checkpoint.CreateSharded(dir, plan, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Plan(); len(got.Files) != len(plan.Files) {
			t.Fatalf("Plan() has %d files", len(got.Files))
		}
		if err := w.WriteTensor("nope", nil); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("unknown tensor: %v", err)
		}
		for _, s := range specs[:len(specs)-1] {
			if err := w.WriteTensor(s.Name, testutil.Data(s, 0)); err != nil {
				t.Fatal(err)
			}
		}
		if abort {
			w.Abort()
		} else if err := w.Close(); err == nil || !strings.Contains(err.Error(), specs[len(specs)-1].Name) {
			t.Errorf("Close with a missing tensor: %v", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("abort=%v left %d files", abort, len(ents))
		}
	}
}
