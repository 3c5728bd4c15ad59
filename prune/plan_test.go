package prune

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/autocompress/autocompress/architecture"
)

func TestReadPlan(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string // substrings of the error; nil = valid
	}{
		{"minimal", `{"version": 1}`, nil},
		{"full", `{"version":1,"hidden":[0,1,5],"layers":[{"layer":0,"heads":[0,2],"neurons":[1,2,3]},{"layer":2,"remove":true},{"layer":3,"mamba_heads":[1]}],"output_format":"padded","engine":"vllm"}`, nil},
		{"version", `{"version": 2}`, []string{"version", "got 2"}},
		{"no version", `{}`, []string{"version", "got 0"}},
		{"unknown field", `{"version":1,"hiden":[1]}`, []string{"unknown field", "hiden"}},
		{"syntax", `{"version":1,`, []string{"pruning plan"}},
		{"type", `{"version":1,"hidden":"all"}`, []string{"hidden", "offset"}},
		{"trailing", `{"version":1} {}`, []string{"trailing"}},
		{"unsorted", `{"version":1,"layers":[{"layer":4,"neurons":[3,1]}]}`, []string{"layer 4", "neurons", "not sorted", "1 after 3"}},
		{"duplicate", `{"version":1,"hidden":[1,2,2]}`, []string{"hidden", "duplicated"}},
		{"negative", `{"version":1,"layers":[{"layer":1,"heads":[-1,2]}]}`, []string{"layer 1", "heads", "negative"}},
		{"empty heads", `{"version":1,"layers":[{"layer":1,"heads":[]}]}`, []string{"layer 1", "heads", "remove_attention"}},
		{"empty hidden", `{"version":1,"hidden":[]}`, []string{"hidden", "every hidden channel"}},
		{"dup layer", `{"version":1,"layers":[{"layer":1,"remove":true},{"layer":1,"remove":true}]}`, []string{"layer 1", "more than one"}},
		{"remove and keep", `{"version":1,"layers":[{"layer":1,"remove":true,"neurons":[1]}]}`, []string{"layer 1", "remove"}},
		{"remove mlp and neurons", `{"version":1,"layers":[{"layer":1,"remove_mlp":true,"neurons":[1]}]}`, []string{"layer 1", "remove_mlp"}},
		{"format", `{"version":1,"output_format":"gguf"}`, []string{"output_format", "gguf"}},
		{"engine", `{"version":1,"engine":"ollama"}`, []string{"engine", "ollama"}},
		{"negative layer", `{"version":1,"layers":[{"layer":-2}]}`, []string{"negative layer"}},
		{"several", `{"version":1,"hidden":[2,1],"layers":[{"layer":0,"heads":[1,1]}]}`, []string{"2 problems", "hidden", "layer 0: heads"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := ReadPlan(strings.NewReader(c.in))
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				must(t, p.Write(&buf))
				q, err := ReadPlan(&buf)
				must(t, err)
				if !reflect.DeepEqual(p, q) {
					t.Errorf("round trip: %+v vs %+v", p, q)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadPlanNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.json")
	must(t, os.WriteFile(path, []byte(`{"version":1,"hidden":[3,3]}`), 0o644))
	_, err := LoadPlan(path)
	var pe *PlanError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), path) {
		t.Errorf("want a *PlanError naming %s, got %v", path, err)
	}
}

// FuzzReadPlan: any input either fails cleanly or yields a plan that passes
// Validate and round-trips through Write.
func FuzzReadPlan(f *testing.F) {
	for _, s := range []string{
		`{"version":1}`,
		`{"version":1,"hidden":[0,1,5],"layers":[{"layer":0,"heads":[0,2],"kv_heads":[0],"neurons":[1,2,3]},{"layer":2,"remove":true}],"output_format":"decilm","engine":"sglang"}`,
		`{"version":1,"layers":[{"layer":3,"mamba_heads":[1,9]},{"layer":4,"remove_attention":true}]}`,
		`{"version":1,"hidden":[]}`, `[]`, `null`, `{"version":1e400}`,
		`{"version":1,"hidden":[1,5,9],"layers":[{"layer":0,"mamba_heads":[0,4]},{"layer":1,"heads":[1,3]},{"layer":5,"neurons":[2]}]}`,
	} {
		f.Add([]byte(s))
	}
	m := fuzzModel(f)
	var names []string
	shapes := map[string][]int{}
	for _, ts := range m.Tensors() {
		names = append(names, ts.Name)
		shapes[ts.Name] = intShape(ts.Shape)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ReadPlan(bytes.NewReader(data))
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ReadPlan accepted an invalid plan: %v", err)
		}
		var buf bytes.Buffer
		if err := p.Write(&buf); err != nil {
			t.Fatal(err)
		}
		q, err := ReadPlan(&buf)
		if err != nil {
			t.Fatalf("written plan does not read back: %v", err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed the plan")
		}
		// Resolving against a model and mapping its tensors must not
		// panic, whatever the plan; a resolved plan maps every tensor.
		for _, format := range []string{"", FormatPadded} {
			q := *p
			q.OutputFormat = format
			lay, err := Resolve(m, &q)
			if err != nil {
				continue
			}
			maps, err := lay.Map(names, shapes)
			if err != nil {
				t.Fatalf("resolved plan does not map: %v", err)
			}
			for _, mp := range maps {
				if len(mp.Shape) != len(shapes[mp.Src]) {
					t.Fatalf("%s: shape %v from %v", mp.Dst, mp.Shape, shapes[mp.Src])
				}
			}
		}
	})
}

func fuzzModel(tb testing.TB) *architecture.Model {
	m, err := architecture.FromConfig(configBytes(tb, nemotronHCfg()))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestTopK(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		s    []float32
		k    int
		want []int
	}{
		{[]float32{0.1, 0.9, 0.5, 0.7}, 2, []int{1, 3}},
		{[]float32{1, 1, 1, 1}, 2, []int{0, 1}},
		{[]float32{nan, 0, -1, nan}, 2, []int{1, 2}},
		{[]float32{3, 2, 1}, 3, []int{0, 1, 2}},
	}
	for _, c := range cases {
		got, err := TopK(c.s, c.k)
		must(t, err)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("TopK(%v, %d) = %v, want %v", c.s, c.k, got, c.want)
		}
	}
	if _, err := TopK([]float32{1}, 2); err == nil {
		t.Error("TopK beyond length accepted")
	}
	g, err := TopKGrouped([]float32{0.1, 0.9, 0.5, 0.7, 0.3, 0.2}, 2, 1)
	must(t, err)
	if !reflect.DeepEqual(g, []int{1, 3}) {
		t.Errorf("TopKGrouped = %v", g)
	}
}

func TestPlanFromScores(t *testing.T) {
	m, err := architecture.FromConfig(configBytes(t, llamaCfg(false)))
	must(t, err)
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32()
		}
		return v
	}
	s := Scores{Hidden: rnd(32), Layers: []float32{0.9, 0.1, 0.5, 0.7}}
	for range 4 {
		s.Heads = append(s.Heads, rnd(8))
		s.Neurons = append(s.Neurons, rnd(48))
	}
	p, err := PlanFromScores(m, s, Targets{Hidden: 24, Heads: []int{4, 4, 4, 4}, Neurons: []int{32, 32, 32, 32}, DropLayers: 1})
	must(t, err)
	if len(p.Hidden) != 24 || p.layerPlan(1) == nil || !p.layerPlan(1).Remove {
		t.Fatalf("plan %+v", p)
	}
	// Each kept head beats the other head of its KV group.
	for _, l := range []int{0, 2, 3} {
		lp := p.layerPlan(l)
		if len(lp.Heads) != 4 || len(lp.Neurons) != 32 {
			t.Fatalf("layer %d: %+v", l, lp)
		}
		for _, h := range lp.Heads {
			other := h ^ 1
			if s.Heads[l][h] < s.Heads[l][other] {
				t.Errorf("layer %d keeps head %d (%.3f) over %d (%.3f)", l, h, s.Heads[l][h], other, s.Heads[l][other])
			}
		}
	}
	if _, err := Resolve(m, p); err != nil {
		t.Fatalf("plan from scores does not resolve: %v", err)
	}
	if _, err := PlanFromScores(m, s, Targets{Heads: []int{3, 3, 3, 3}}); err == nil {
		t.Error("3 heads over 4 groups accepted")
	}
	if _, err := PlanFromScores(m, s, Targets{Neurons: []int{3}}); err == nil {
		t.Error("short per-layer targets accepted")
	}
}

// TestGather checks the byte slicer for every element size against the
// test's own float32 slicing (refTake), with zero padding.
func TestGather(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, elem := range []int{1, 2, 4, 8} {
		for _, shape := range [][]int{{7}, {5, 6}, {4, 3, 2}, {1, 9}, {6, 1, 3}} {
			n := 1
			for _, d := range shape {
				n *= d
			}
			// Encode element i as the integer i+1 in elem bytes, so that
			// zeros are distinguishable from any real element.
			src := make([]byte, n*elem)
			for i := 0; i < n; i++ {
				putUint(src[i*elem:(i+1)*elem], uint64(i+1))
			}
			for trial := 0; trial < 20; trial++ {
				sel := Selection{Rows: randIdx(r, shape[0])}
				if len(shape) > 1 && trial%2 == 0 {
					sel.Cols = randIdx(r, shape[1])
				}
				if len(shape) == 3 && trial%3 == 0 {
					sel.Inner = randIdx(r, shape[2])
				}
				got, err := Gather(nil, src, shape, elem, sel)
				must(t, err)
				vals := make([]float32, n)
				for i := range vals {
					vals[i] = float32(i + 1)
				}
				want, wshape := refTake(vals, toI64(shape), sel.Rows, sel.Cols)
				if sel.Inner != nil {
					want, _ = refTakeLast(want, wshape, sel.Inner)
				}
				if len(got) != len(want)*elem {
					t.Fatalf("elem %d shape %v sel %+v: %d bytes, want %d", elem, shape, sel, len(got), len(want)*elem)
				}
				for i, w := range want {
					if g := getUint(got[i*elem : (i+1)*elem]); g != uint64(w) {
						t.Fatalf("elem %d shape %v sel %+v: element %d = %d, want %v", elem, shape, sel, i, g, w)
					}
				}
				// The streaming reader agrees with Gather.
				gr, err := newGatherReader(bytes.NewReader(src), "t", shape, elem, sel, false, nil)
				must(t, err)
				var buf bytes.Buffer
				if _, err := buf.ReadFrom(gr); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(buf.Bytes(), got) {
					t.Fatalf("gatherReader differs from Gather for shape %v sel %+v", shape, sel)
				}
				// Read in tiny pieces (smaller than a row) as well.
				gr, err = newGatherReader(bytes.NewReader(src), "t", shape, elem, sel, false, nil)
				must(t, err)
				small, err := io.ReadAll(iotest.OneByteReader(gr))
				must(t, err)
				if !bytes.Equal(small, got) {
					t.Fatalf("byte-wise gatherReader differs from Gather for shape %v sel %+v", shape, sel)
				}
			}
		}
	}
	if _, err := Gather(nil, make([]byte, 10), []int{3, 2}, 2, Selection{}); err == nil {
		t.Error("size mismatch accepted")
	}
	if _, err := Gather(nil, make([]byte, 12), []int{3, 2}, 2, Selection{Rows: []int{3}}); err == nil {
		t.Error("row out of range accepted")
	}
	if _, err := Gather(nil, make([]byte, 12), []int{3, 2}, 2, Selection{Inner: []int{0}}); err == nil {
		t.Error("a dimension-2 selection of a 2-D tensor accepted")
	}
}

func randIdx(r *rand.Rand, n int) []int {
	k := 1 + r.IntN(n+1)
	out := make([]int, k)
	for i := range out {
		out[i] = r.IntN(n+1) - 1 // -1 = padding
	}
	return out
}

func putUint(b []byte, v uint64) {
	var tmp [8]byte
	binary.LittleEndian.PutUint64(tmp[:], v)
	copy(b, tmp[:len(b)])
}

func getUint(b []byte) uint64 {
	var tmp [8]byte
	copy(tmp[:], b)
	return binary.LittleEndian.Uint64(tmp[:])
}

func toI64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}

func TestPlanTypeErrorsSpeakJSON(t *testing.T) {
	for _, tc := range []struct{ plan, want string }{
		{`{"version":1,"layers":{"0":{"mlp":[3,1]}}}`, `field "layers" at byte offset 23: want a list (JSON array) of objects, got object`},
		{`{"version":1,"hidden":"x"}`, `field "hidden" at byte offset 25: want a list (JSON array) of integers, got string`},
	} {
		_, err := ReadPlan(strings.NewReader(tc.plan))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ReadPlan(%s) = %v, want %q", tc.plan, err, tc.want)
		}
	}
}
