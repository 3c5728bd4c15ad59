package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/autocompress/autocompress/architecture"
)

// hybridArch is a small Nemotron-H: the pattern M*-M- (Mamba2, attention
// without RoPE, relu² MLP), 4 Mamba heads in 2 groups.
func hybridArch(t testing.TB) *architecture.Model {
	t.Helper()
	a, err := architecture.FromConfig([]byte(`{
		"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
		"vocab_size": 13, "hidden_size": 8, "hybrid_override_pattern": "M*-M-",
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 4,
		"intermediate_size": 12, "mlp_hidden_act": "relu2",
		"mamba_num_heads": 4, "mamba_head_dim": 3, "ssm_state_size": 5, "n_groups": 2,
		"conv_kernel": 4, "use_conv_bias": true, "chunk_size": 8,
		"layer_norm_epsilon": 1e-5, "tie_word_embeddings": false, "max_position_embeddings": 256}`))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func hybridModel(t testing.TB) *Model {
	t.Helper()
	m, err := New(hybridArch(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 5, 0.4)
	for _, s := range m.specs {
		if s.kind == "mamba_a_log" || s.kind == "mamba_dt_bias" {
			w := m.Tensor(s.Name)
			for j := range w {
				w[j] = 0.3 * float32(j%3)
			}
		}
	}
	return m
}

// TestHybridDecodeMatchesPrefill: a Nemotron-H model run incrementally
// (prompt chunks of several sizes, then single tokens, several sequences
// in one Step, each carrying its conv and SSM state) gives the logits of
// one forward pass over each whole sequence; a copied cache continues
// like the original.
func TestHybridDecodeMatchesPrefill(t *testing.T) {
	m := hybridModel(t)
	const T = 40
	V := m.arch.Vocab
	r := rand.New(rand.NewPCG(1, 2))
	seqs := [][]int32{randTokens(r, T, V), randTokens(r, T, V), randTokens(r, T, V)}
	full := make([][]float32, len(seqs))
	for i, s := range seqs {
		l, err := m.Forward(s, 1, T)
		if err != nil {
			t.Fatal(err)
		}
		full[i] = append([]float32(nil), l...)
	}
	chunks := [][]int{{20, 1, 1, 3, 15}, {1, 1, 1, 2, 35}, {2, 30, 5, 2, 1}}
	caches := []*Cache{m.NewCache(T), m.NewCache(T), m.NewCache(T)}
	pos := make([]int, 3)
	for step := range 5 {
		toks := make([][]int32, 3)
		for i := range seqs {
			toks[i] = seqs[i][pos[i] : pos[i]+chunks[i][step]]
		}
		out, err := m.Step(caches, toks, true)
		if err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			for j := range toks[i] {
				p := pos[i] + j
				if d := maxAbsDiff(out[i][j*V:(j+1)*V], full[i][p*V:(p+1)*V]); d > 1e-5 {
					t.Fatalf("seq %d position %d (step %d): decode logits differ from the forward pass by %.3g", i, p, step, d)
				}
			}
			pos[i] += chunks[i][step]
		}
	}
	// Batch rows are independent sequences in Forward too.
	both, err := m.Forward(append(append([]int32(nil), seqs[0]...), seqs[1]...), 2, T)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(both[T*V:], full[1]); d > 1e-5 {
		t.Errorf("row 1 of a batch of 2 differs from its own forward pass by %.3g", d)
	}
	// A copied prefix continues like the whole sequence; a reset cache
	// starts from zero states.
	pre := m.NewCache(T)
	if _, err := m.Step([]*Cache{pre}, [][]int32{seqs[2][:25]}, false); err != nil {
		t.Fatal(err)
	}
	cp := m.NewCache(T)
	if err := cp.CopyFrom(pre); err != nil {
		t.Fatal(err)
	}
	out, err := m.Step([]*Cache{cp}, [][]int32{seqs[2][25:30]}, true)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(out[0], full[2][25*V:30*V]); d > 1e-5 {
		t.Errorf("copied cache: logits differ by %.3g", d)
	}
	pre.Reset()
	out, err = m.Step([]*Cache{pre}, [][]int32{seqs[0][:10]}, true)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(out[0], full[0][:10*V]); d > 1e-5 {
		t.Errorf("reset cache: logits differ by %.3g", d)
	}
	// The cache holds the Mamba state: a fixed size per Mamba layer.
	var want int64
	for _, d := range m.dims {
		if d.attn {
			want += int64(2*T*d.kd) * 4
		}
		if d.mamba != nil {
			want += int64(d.mamba.stateFloats()) * 4
		}
	}
	if got := pre.Bytes(); got != want {
		t.Errorf("cache Bytes = %d, want %d (KV plus Mamba state)", got, want)
	}
}

// TestHybridGenerateServe: generation and serving run a hybrid model, and
// serving's greedy outputs are generation's.
func TestHybridGenerateServe(t *testing.T) {
	m := hybridModel(t)
	r := rand.New(rand.NewPCG(4, 4))
	var reqs []ServeRequest
	for i := range 5 {
		reqs = append(reqs, ServeRequest{Prompt: randTokens(r, 3+4*i, m.arch.Vocab), Output: 2 + i%4})
	}
	for _, opt := range []ServeOptions{{Concurrency: 3, PrefillTokens: 5}, {MaxBatch: 2, PrefillTokens: 4}} {
		st, err := m.Serve(context.Background(), reqs, opt)
		if err != nil {
			t.Fatal(err)
		}
		for i, rq := range reqs {
			want, err := m.Generate(context.Background(), rq.Prompt, GenerateOptions{MaxTokens: rq.Output, Greedy: true, EOS: []int{}})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(st.Requests[i].Tokens) != fmt.Sprint(want) {
				t.Fatalf("%+v request %d: served %v, alone %v", opt, i, st.Requests[i].Tokens, want)
			}
		}
		if st.PeakKVBytes <= 0 {
			t.Errorf("PeakKVBytes = %d, want > 0 (KV and Mamba state)", st.PeakKVBytes)
		}
	}
}

// TestHybridForwardOnly: backward through a Mamba2 mixer is refused, and
// CheckTrain says so from the description.
func TestHybridForwardOnly(t *testing.T) {
	m := hybridModel(t)
	tok := []int32{1, 2, 3, 4, 5, 6}
	if _, err := m.ForwardLoss(tok, tok, 1, 6); err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(); !errors.Is(err, ErrMambaBackward) {
		t.Errorf("Backward = %v, want ErrMambaBackward", err)
	}
	if err := Check(m.arch); err != nil {
		t.Errorf("Check(Nemotron-H) = %v, want nil", err)
	}
	var ue *UnsupportedError
	if err := CheckTrain(m.arch); !errors.As(err, &ue) || ue.Layer != 0 {
		t.Errorf("CheckTrain = %v, want an *UnsupportedError for layer 0", err)
	}
	bad := hybridArch(t)
	bad.Layers[0].Mamba.Heads = 3
	if err := Check(bad); !errors.As(err, &ue) || ue.Layer != 0 || !contains(err.Error(), "multiple of n_groups") {
		t.Errorf("Check with 3 heads in 2 groups = %v, want a refusal of layer 0", err)
	}
}

// TestHybridObserverAndSkip: a Mamba layer reports its heads
// (SiteMambaHeads, with groups) and its norm (SiteAttnNorm); skipping its
// mixer (BlockAttention) or the whole layer makes it an identity.
func TestHybridObserverAndSkip(t *testing.T) {
	m := hybridModel(t)
	const T = 7
	tok := []int32{1, 2, 3, 4, 5, 6, 7}
	var heads []*Activation
	m.SetObserver(ObserverFunc(func(a *Activation) {
		if a.Site == SiteMambaHeads {
			c := *a
			heads = append(heads, &c)
		}
	}))
	if _, err := m.Forward(tok, 1, T); err != nil {
		t.Fatal(err)
	}
	if len(heads) != 2 || heads[0].Layer != 0 || heads[1].Layer != 3 || heads[0].Heads != 4 || heads[0].HeadDim != 3 || heads[0].Groups != 2 || heads[0].Width != 12 {
		t.Fatalf("SiteMambaHeads observations: %+v", heads)
	}
	m.SetObserver(nil)
	a, _ := m.Forward(tok, 1, T)
	a = append([]float32(nil), a...)
	if err := m.SetSkipBlock(BlockAttention, 0); err != nil {
		t.Fatal(err)
	}
	b, _ := m.Forward(tok, 1, T)
	b = append([]float32(nil), b...)
	m.SetSkipBlock(BlockAttention)
	m.SetSkip(0)
	c, _ := m.Forward(tok, 1, T)
	if maxAbsDiff(a, b) == 0 || maxAbsDiff(b, c) != 0 {
		t.Errorf("skipping layer 0's mixer: changed %v, equal to skipping the layer %v", maxAbsDiff(a, b) != 0, maxAbsDiff(b, c) == 0)
	}
}
