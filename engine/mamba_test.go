package engine

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/autocompress/autocompress/checkpoint"
)

// TestMamba2MixerTorch compares mamba2Forward (sequential scan) on random
// weights with testdata/mamba2_reference.py, which re-states
// NemotronHMamba2Mixer.torch_forward's chunked SSD in plain torch
// (Debian's /usr/bin/python3 with torch; skipped without them): grouped
// heads (2 groups of 2), a sequence longer than the chunk and not a
// multiple of it; max |Δ| ≤ 1e-4 · max |out|.
func TestMamba2MixerTorch(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s is absent: the Mamba2 parity against torch is not checked (install Debian's python3 and python3-torch)", python)
	}
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s has no torch (%v): the Mamba2 parity against torch is not checked (install python3-torch)", python, err)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "mamba2_reference.py"))
	if err != nil {
		t.Fatal(err)
	}
	d := mambaDims{heads: 4, headDim: 3, state: 5, groups: 2, conv: 4, eps: 1e-5, dtMin: 0.001}
	const B, T, H, chunk = 2, 11, 8, 4
	r := rand.New(rand.NewPCG(7, 8))
	randn := func(n int, std, mean float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + std*r.NormFloat64())
		}
		return v
	}
	di, cd := d.dInner(), d.convDim()
	w := mambaWeights{
		in: randn(d.projDim()*H, 0.4, 0), conv: randn(cd*d.conv, 0.4, 0), convB: randn(cd, 0.1, 0),
		dtBias: randn(d.heads, 0.5, 0), aLog: randn(d.heads, 0.3, 0.5), d: randn(d.heads, 0.5, 1),
		norm: randn(di, 0.1, 1), out: randn(H*di, 0.4, 0),
	}
	x := randn(B*T*H, 1, 0)
	tensors := []struct {
		name  string
		shape []int64
		data  []float32
	}{
		{"in_proj", []int64{int64(d.projDim()), H}, w.in}, {"conv1d", []int64{int64(cd), 1, int64(d.conv)}, w.conv},
		{"conv1d_bias", []int64{int64(cd)}, w.convB}, {"dt_bias", []int64{int64(d.heads)}, w.dtBias},
		{"A_log", []int64{int64(d.heads)}, w.aLog}, {"D", []int64{int64(d.heads)}, w.d},
		{"norm", []int64{int64(di)}, w.norm}, {"out_proj", []int64{H, int64(di)}, w.out}, {"x", []int64{B, T, H}, x},
	}
	var specs []checkpoint.TensorSpec
	for _, tn := range tensors {
		specs = append(specs, checkpoint.TensorSpec{Name: tn.name, DType: checkpoint.F32, Shape: tn.shape})
	}
	itoa := strconv.Itoa
	meta := map[string]string{"heads": itoa(d.heads), "head_dim": itoa(d.headDim), "state": itoa(d.state), "groups": itoa(d.groups),
		"conv": itoa(d.conv), "chunk": itoa(chunk), "eps": "1e-5", "dt_min": "0.001"}
	dir := t.TempDir()
	if k := os.Getenv("MAMBA_KEEP"); k != "" {
		dir = k
	}
	in, outPath := filepath.Join(dir, "in.safetensors"), filepath.Join(dir, "out.json")
	cw, err := checkpoint.Create(in, specs, meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range tensors {
		if err := cw.WriteFloat32(tn.name, tn.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(python, "-B", script, in, outPath).CombinedOutput(); err != nil {
		t.Fatalf("mamba2_reference.py: %v\n%s", err, out)
	}
	data, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct{ Out []float32 }
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, B*T*H)
	mamba2Forward(got, x, B, T, H, d, w)
	if len(ref.Out) != len(got) {
		t.Fatalf("reference has %d values, the engine %d", len(ref.Out), len(got))
	}
	var scale float64
	for _, v := range ref.Out {
		scale = max(scale, math.Abs(float64(v)))
	}
	rel := maxAbsDiff(got, ref.Out) / scale
	if rel > 1e-4 {
		t.Errorf("max |Δ| / max |out| = %.3g > 1e-4", rel)
	}
	t.Logf("Mamba2 mixer: max |Δ| / max |out| = %.3g (max |out| %.3g)", rel, scale)
}
