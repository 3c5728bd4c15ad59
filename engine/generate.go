package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
)

// GenerateOptions control Generate.
type GenerateOptions struct {
	// MaxTokens is the most tokens to generate (> 0).
	MaxTokens int
	// Greedy picks the most likely token; it is implied by Temperature 0.
	Greedy bool
	// Temperature divides the logits before sampling (> 0 unless greedy).
	Temperature float64
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP (nucleus sampling); 0 or 1 disables it.
	TopP float64
	// Seed seeds the sampler (PCG), so a run is reproducible.
	Seed uint64
	// EOS lists the ids that end generation; nil means the model's EOS ids.
	// The EOS token is not included in the output.
	EOS []int
	// OnToken, if set, is called with each generated token as it is
	// produced; returning false stops generation.
	OnToken func(id int32) bool
}

// generateCacheChunk is how many tokens past the prompt Generate's KV cache
// holds at first.
var generateCacheChunk = 4096

// Generate continues prompt (token ids, at least one) and returns the
// generated ids. It runs the prompt through the KV cache in one Step and
// then decodes one token per Step.
func (m *Model) Generate(ctx context.Context, prompt []int32, opt GenerateOptions) ([]int32, error) {
	if len(prompt) == 0 {
		return nil, &InputError{"generate: empty prompt (give at least one token, e.g. BOS)"}
	}
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	greedy := opt.Greedy || opt.Temperature == 0
	eos := opt.EOS
	if eos == nil {
		eos = m.arch.EOS
	}
	isEOS := map[int32]bool{}
	for _, e := range eos {
		isEOS[int32(e)] = true
	}
	r := rand.New(rand.NewPCG(opt.Seed, opt.Seed^0xda3e39cb94b95bdb))
	// The KV cache grows with what is generated (doubling, up to the prompt
	// plus MaxTokens), so that a large MaxTokens (past the context, with
	// the EOS ignored) costs memory only as tokens come.
	full := len(prompt) + min(opt.MaxTokens, math.MaxInt-len(prompt))
	cache := m.NewCache(min(full, len(prompt)+generateCacheChunk))
	next := prompt
	var out []int32
	for len(out) < opt.MaxTokens {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if need := cache.n + len(next); need > cache.cap {
			bigger := m.NewCache(min(full, max(need, 2*cache.cap)))
			if err := bigger.CopyFrom(cache); err != nil {
				return out, err
			}
			cache = bigger
		}
		logits, err := m.Step([]*Cache{cache}, [][]int32{next}, false)
		if err != nil {
			return out, err
		}
		var id int32
		if greedy {
			id = Argmax(logits[0])
		} else {
			id = Sample(logits[0], opt.Temperature, opt.TopP, r)
		}
		if isEOS[id] {
			break
		}
		out = append(out, id)
		if opt.OnToken != nil && !opt.OnToken(id) {
			break
		}
		next = []int32{id}
	}
	return out, nil
}

// Argmax returns the index of the largest logit (the first on ties).
func Argmax(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// Sample draws a token from softmax(logits/temperature), restricted to the
// top-p nucleus when 0 < topP < 1.
func Sample(logits []float32, temperature, topP float64, r *rand.Rand) int32 {
	if temperature <= 0 {
		return Argmax(logits)
	}
	mx := float64(logits[Argmax(logits)])
	probs := make([]float64, len(logits))
	var sum float64
	for i, v := range logits {
		probs[i] = math.Exp((float64(v) - mx) / temperature)
		sum += probs[i]
	}
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	limit := len(idx)
	if topP > 0 && topP < 1 {
		sort.Slice(idx, func(a, b int) bool { return probs[idx[a]] > probs[idx[b]] })
		var cum float64
		for k, i := range idx {
			cum += probs[i] / sum
			if cum >= topP {
				limit = k + 1
				break
			}
		}
		sum = 0
		for _, i := range idx[:limit] {
			sum += probs[i]
		}
	}
	u := r.Float64() * sum
	for _, i := range idx[:limit] {
		u -= probs[i]
		if u < 0 {
			return int32(i)
		}
	}
	return int32(idx[limit-1])
}
