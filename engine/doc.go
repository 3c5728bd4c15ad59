// Package engine is autocompress's native compute engine: a Llama-family
// decoder (forward, backward, KV-cache generation) in plain Go over float32,
// with every matrix product delegated to engine/blas (OpenBLAS through cgo
// with the "openblas" build tag, a pure-Go kernel otherwise).
//
// # Models
//
// A Model runs any architecture.Model whose layers have attention and/or an
// MLP: embeddings, RMSNorm, grouped-query attention with RoPE (rotate_half,
// partial rotary, linear, llama3 and (gpt-oss) yarn rope scaling, optional
// sliding window), optional per-head qk-norm (Qwen3) and q/k/v and o_proj biases (Qwen2), a
// SwiGLU (or non-gated silu/gelu/relu/relu² MLP), and a tied or untied LM
// head. Every layer may have its own head count, kv-head count, head_dim
// and FFN width, and may lack attention or MLP (DeciLM "no_op" blocks).
// Mixture-of-experts layers (Mixtral, Qwen3-MoE: softmax top-k routing by
// the family's architecture.RouterRule, gated unbiased experts, no shared
// expert) run forward and backward (moe.go): experts as gathered GEMMs, the
// router's gradient through the softmax, top-k selection and optional
// renormalisation as autograd takes it, no auxiliary load-balancing loss;
// ExpertStats collects their routing (SiteMoERouting) for per-expert
// importance. Mamba2 mixers run forward only: their backward passes return
// ErrMambaBackward and CheckTrain refuses them. gpt-oss runs forward only
// too (importance, eval, the proxy, generation and serving with the KV
// cache; its backward passes return ErrGptOssBackward, CheckTrain refuses
// it and training goes through the reference trainer, engine torch):
// learned per-head attention sinks (one more softmax column per query
// row, dropped from the output), alternating sliding and full attention
// (layer_types; the window applies in prefill and cached decode), YaRN
// RoPE (rope.go: the inverse frequencies blended along the ramp, cos and
// sin scaled by the attention factor; run for the families whose
// architecture.YaRNRule says so, gpt-oss, with GptOssConfig's default when
// config.json has none), q/k/v/o biases, and its MoE block (moe.go: a
// biased router, top-k of the logits then softmax over the k, stacked
// gate_up_proj/down_proj experts with biases and the clamped SwiGLU). Its
// MXFP4 checkpoints are not read (Load says to dequantize first).
// Which families it runs is each family's Engine fact
// (architecture.Family); a family it cannot run and a layer it cannot run
// (MoE with shared experts, unrouted biases or sigmoid routing) are
// refused with an *UnsupportedError,
// which Check gives from the description alone, before any weight is read.
// Tensors are bound by their kind (architecture.TensorSpec), so the engine
// knows no family's tensor names.
//
//	m, err := engine.Load("path/to/hf-model")   // or engine.New(arch, seed)
//	logits, err := m.Forward(tokens, B, T)      // (B·T, vocab)
//
// # Weights in their checkpoint dtype
//
// Load converts every tensor to float32. LoadWith(dir, LoadOptions{Mapped:
// true}) instead reads the weight matrices (embedding, projections, MLP, LM
// head) in place from the memory-mapped checkpoint in their stored dtype
// (BF16, F16 or F32): each product converts one tile of weights at a time
// (blas.SgemmHalf) and accumulates in float32, so a bf16 parent's forward
// pass holds about its file size plus activations, and its logits are
// bit-identical to those of the checkpoint converted to float32 first
// (TestMappedBitExact). Norms and biases are float32 in the slab. Such a
// model is forward-only (importance, evaluation, generation, serving, a
// distillation teacher); Stream additionally releases each layer's pages
// after it has run, bounding the resident set to about one layer. A tensor
// whose dtype the engine cannot read (integers) is a *DTypeError.
//
// # Parameters and gradients
//
// All parameters live in ONE contiguous []float32 slab, Params(); gradients
// in a second slab of the same layout, Grads(). Each tensor is a contiguous
// range with its HuggingFace name and [out, in] shape (Specs, Tensor, Grad,
// Offset), so an optimiser such as AdamW is one loop over the slabs, and
// loading, pruning and saving are straight copies.
//
// # Training
//
//	m.ZeroGrad()
//	loss, err := m.ForwardLoss(tokens, targets, B, T) // mean cross-entropy, target < 0 ignored
//	err = m.Backward()                                // Grads() += ∂loss/∂params
//
// For another loss (e.g. knowledge distillation against teacher logits),
// run Forward, compute ∂loss/∂logits yourself and call
// BackwardFromLogits(dlogits). Backward passes accumulate into Grads.
//
// Activations for a (B, T) are allocated by the first forward pass and
// reused while (B, T) stays the same; the logits returned by Forward are
// owned by the model and overwritten by the next pass. SetInference(true)
// keeps no activations for backward (all layers share one set of buffers),
// for calibration and evaluation of deep models at long sequence lengths.
//
// Each layer kind has one function pair, xxxForward / xxxBackward, in
// layers.go, with its shapes in the doc comment; backward functions
// accumulate.
//
// # Observation hooks (importance)
//
// SetObserver installs an Observer that sees, during every forward pass and
// for every layer l, the activations that activation-importance scoring
// needs (see Site):
//
//   - SiteLayerInput, SiteLayerOutput: the hidden states entering and
//     leaving layer l, (B·T, hidden) — block influence 1 − cos(in, out);
//   - SiteAttnNorm, SiteMLPNorm: the outputs of input_layernorm and
//     post_attention_layernorm, (B·T, hidden) — hidden-channel importance;
//   - SiteAttnHeads: the attention output before o_proj,
//     (B·T, heads·head_dim) — head importance;
//   - SiteAttnResidual: the residual stream between attention and MLP,
//     (B·T, hidden) — sub-block influence;
//   - SiteMLPAct: act(gate)·up, the input of down_proj, (B·T, ffn) — neuron
//     importance;
//   - SiteFinalNorm (Layer = number of layers): the final norm's output.
//
// A nil observer costs nothing. SetSkip(layers...) turns layers into
// identities in forward and backward, to measure the loss increase when a
// layer is removed; SetSkipBlock(BlockAttention or BlockMLP, layers...) does
// the same for one sub-block (with its norm), which computes exactly what a
// child with that sub-block removed computes. ForwardLossFrom(l, hidden,
// ...) reruns only layers l.. from a layer input an observer cached
// (SiteLayerInput), bit for bit the loss of the whole pass with the same
// skips, at the cost ForwardFLOPsFrom gives: importance scores every skip
// that way. TokenLosses returns the last loss pass's cross-entropy per
// position, so that two passes over the same tokens (a skip and the base
// model) are compared token by token.
//
// # Generation and serving
//
// NewCache and Step run the model incrementally with a KV cache, several
// sequences at once, each feeding a prompt chunk or decoding one token;
// Generate decodes greedily or by seeded temperature / top-p sampling and
// stops at EOS; Serve runs a request stream with continuous batching and
// chunked prefill and measures TTFT, TPOT and latency per request.
//
// # Speed
//
// Matrix products go through engine/blas. Attention is computed per (batch
// row, head) in blocks of 64 query rows with GEMMs, skipping the causal
// upper triangle; its probabilities are not stored but recomputed in the
// backward pass, so activation memory grows with T, not T². Elementwise
// operations split rows across GOMAXPROCS goroutines; GEMMs are split the
// same way (OpenBLAS runs single-threaded per goroutine), so the two never
// oversubscribe the cores. Products of a few rows (decoding) below about
// 2²³ multiply-adds, and decode-step attention below 2²², stay on one core:
// there the goroutine fan-out costs more than the second core gives.
// Softmax, norm outputs and residual adds use AVX2 kernels (engine/blas
// Max, Scale, MulScale, Axpy). ForwardFLOPs gives the model FLOPs that the
// speed benchmark (BenchmarkEngineSpeed) divides by the sgemm peak measured
// in the same run; it reports the median of per-round ratios.
//
// Serve reuses its buffers (step bookkeeping, attention scratch, and the KV
// caches of finished requests, which the model keeps for later runs), and
// packing buffers live in lists that garbage collection does not empty, so
// a steady serving step allocates only the goroutine fan-out (about 25 KB,
// TestServeSteadyStateAllocation) and collections during a timed run are
// rare.
package engine
