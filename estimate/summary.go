package estimate

import (
	"math"

	"github.com/autocompress/autocompress/architecture"
)

// maxMoEGroups bounds the distinct (experts, top-k) shapes a Summary keeps;
// layers beyond that are merged into the last group (an approximation for
// models with more than four different expert layouts).
const maxMoEGroups = 4

type moeGroup struct {
	Experts, TopK int
	// Bytes is the sum over the group's layers of one routed expert's
	// weight bytes per GPU.
	Bytes float64
}

// Summary holds the per-GPU sums over layers that the memory and time
// models need. It is computed once per (model, precision, KV type, TP) by
// Summarize, without allocating, so that a search can price a candidate
// cheaply. All byte and FLOP figures are per GPU of a TP group.
type Summary struct {
	Layers, AttnLayers, MoELayers, MambaLayers int
	Hidden, Vocab                              int
	MaxFFN                                     int // widest MLP or expert intermediate (activation buffers)
	TP                                         int

	// TotalParams and ActiveParams count all and per-token parameters of the model (not per GPU).
	TotalParams, ActiveParams float64

	WeightBytes float64 // all weights resident on one GPU
	// StoredBits is the width of the checkpoint's weights as stored
	// (config.json's torch_dtype: 32 for float32, 16 otherwise), which the
	// native engine reads in place: its resident weights are WeightBytes
	// (priced at its float32 compute width) × StoredBits/32.
	StoredBits int
	EmbedBytes float64 // token embedding (resident, not streamed)
	HeadBytes  float64 // LM head (streamed each step; 0 extra when tied, but still read)
	// DenseBytes are the weights read by every step whatever the batch:
	// attention, dense MLPs, shared experts, routers, Mamba, norms and the LM head.
	DenseBytes float64
	moe        [maxMoEGroups]moeGroup
	nMoE       int

	// LinearFLOPs are the FLOPs per token of the active linear layers (2·params), LM head excluded.
	LinearFLOPs float64
	// HeadFLOPs are the LM-head FLOPs per sampled token.
	HeadFLOPs float64
	// AttnFLOPs is the sum over full-attention layers of 4·n_q·d_h: attention
	// FLOPs per (query token × context token). SWAFLOPs is the same for
	// sliding-window layers, whose context is capped at Window.
	AttnFLOPs, SWAFLOPs float64
	Window              int
	// ScanFLOPs approximate the Mamba2 SSD scan per token (∝ d_inner·d_state).
	ScanFLOPs float64

	// KVBytes is the KV cache per token of context for full-attention layers;
	// SWAKVBytes for sliding-window layers (capped at Window tokens per sequence).
	KVBytes, SWAKVBytes float64
	// StateBytes is the recurrent (Mamba conv + SSM) state per sequence.
	StateBytes float64

	// MLPLayers counts the dense MLP sub-blocks; AttnHeads is the sum of
	// query heads over attention layers; MaxQDim and MaxKVDim are the widest
	// heads·head_dim and kv_heads·head_dim; ElemWidth is the elementwise work
	// per token row summed over layers, in elements (norms and residuals
	// 2·hidden per sub-block, RoPE and cache writes q + 3·kv per attention,
	// activation 3·ffn per MLP). The native engine's step and memory models
	// use them.
	MLPLayers         int
	AttnHeads         float64
	MaxQDim, MaxKVDim int
	ElemWidth         float64

	// AllReduces is the number of TP all-reduces per step (one per sub-block,
	// 0 at TP 1); ARBytes are their bytes per token.
	AllReduces int
	ARBytes    float64
}

// Summarize computes s for model m deployed with precision p, KV type kv and
// tensor-parallel degree tp (≥ 1). It does not allocate. stateBytes is the
// element size of the recurrent state (4 for F32, 2 for the model dtype).
func Summarize(s *Summary, m *architecture.Model, p *Precision, kv KVType, stateBytes float64, tp int) {
	*s = Summary{}
	if tp < 1 {
		tp = 1
	}
	sumLayers(s, m.Layers, m.Hidden, p, kv, stateBytes, tp)
	finish(s, m, p, tp)
}

// sumLayers adds the per-layer terms of layers into s (whose other fields
// must be zero).
func sumLayers(s *Summary, layers []architecture.Layer, h int, p *Precision, kv KVType, stateBytes float64, tp int) {
	s.TP = tp
	ftp := float64(tp)
	fh := float64(h)
	s.Layers = len(layers)
	lin := p.LinearBPW / 8
	small := p.SmallBPW / 8
	linTP := lin / ftp // bytes per sharded linear element on one GPU
	twoTP := 2 / ftp   // FLOPs per sharded linear element per token
	fourTP := 4 / ftp
	kvb := kv.Bytes
	// Sums kept in locals (registers) for speed: this loop is the search's hot path.
	var total, active, dense, linF, attnF, swaF, kvB, swaKV, scan, state float64
	var attnL, moeL, mambaL, ars, window, maxFFN int
	var mlpL, maxQ, maxKV int
	var heads, elem float64
	lastKV, lastKVPer := -1, 0.0 // memo of the KV-head rounding (integer division)
	prevKV, prevKVPer := -1, 0.0
	expertsOnly, bf16TP, fmtTP := p.ExpertsOnly, 2/ftp, linTP
	if p.OtherBPW > 0 {
		// Every projection but the routed experts' at OtherBPW.
		bf16TP = p.OtherBPW / 8 / ftp
		fmtTP = bf16TP
	}
	// Attention and dense-MLP elements are summed raw (linN: in the
	// deployed format, linN16: BF16 ones of MoE layers under ExpertsOnly;
	// smN: small vectors) and converted to bytes and FLOPs once after the
	// loop: fewer dependent floating-point operations per layer.
	var linN, linN16, smN float64
	for i := range layers {
		l := &layers[i]
		linTP := fmtTP
		moeBF16 := expertsOnly && l.MoE != nil
		if moeBF16 {
			// Only the experts carry the format; attention and router stay BF16.
			linTP = bf16TP
		}
		if a := l.Attention; a != nil {
			ars++
			attnL++
			hd := float64(a.HeadDim)
			q := float64(a.Heads) * hd
			kvd := float64(a.KVHeads) * hd
			heads += float64(a.Heads)
			elem += 2*fh + q + 3*kvd
			maxQ = max(maxQ, a.Heads*a.HeadDim)
			maxKV = max(maxKV, a.KVHeads*a.HeadDim)
			n := fh * (2*q + 2*kvd)
			sm := fh
			if a.QKVBias || a.OutBias || a.QKNorm || a.Sinks {
				if a.Sinks {
					sm += float64(a.Heads)
				}
				if a.QKVBias {
					sm += q + 2*kvd
				}
				if a.OutBias {
					sm += fh
				}
				if a.QKNorm {
					sm += 2 * hd
				}
			}
			if moeBF16 {
				linN16 += n
			} else {
				linN += n
			}
			smN += sm
			if tp == 1 {
				lastKVPer = 2 * float64(a.KVHeads)
			} else if a.KVHeads != lastKV {
				// Two-entry memo: pruned models alternate between a few
				// KV-head counts, and the integer division is the slowest
				// operation of the loop.
				if a.KVHeads == prevKV {
					lastKV, prevKV = prevKV, lastKV
					lastKVPer, prevKVPer = prevKVPer, lastKVPer
				} else {
					prevKV, prevKVPer = lastKV, lastKVPer
					lastKV = a.KVHeads
					lastKVPer = 2 * float64(max((a.KVHeads+tp-1)/tp, 1))
				}
			}
			per := lastKVPer * hd * kvb
			qh := fourTP * q
			if a.SlidingWindow > 0 {
				swaKV += per
				swaF += qh
				window = max(window, a.SlidingWindow)
			} else {
				kvB += per
				attnF += qh
			}
		}
		if f := l.MLP; f != nil {
			ars++
			mlpL++
			w := float64(f.Width)
			elem += 2*fh + 3*w
			mats := 2.0
			if f.Gated {
				mats = 3
			}
			n := mats * fh * w
			sm := fh
			if f.Bias {
				sm += w*(mats-1) + fh
			}
			if moeBF16 {
				linN16 += n
			} else {
				linN += n
			}
			smN += sm
			if f.Width > maxFFN {
				maxFFN = f.Width
			}
		}
		if e := l.MoE; e != nil {
			ars++
			moeL++
			mats := 2.0
			if e.Gated {
				mats = 3
			}
			we := float64(e.ExpertWidth)
			in := fh // LatentMoE experts run at the latent width
			if e.LatentSize > 0 {
				in = float64(e.LatentSize)
			}
			expert := mats * in * we
			if e.ExpertBias {
				expert += we*(mats-1) + in
			}
			router := fh * float64(e.Experts)
			if e.RouterBias {
				router += float64(e.Experts)
			}
			if e.RouterCorrection {
				router += float64(e.Experts)
			}
			shared := mats * fh * float64(e.SharedWidth)
			if e.LatentSize > 0 {
				shared += 2 * fh * in // fc1/fc2 latent projections, always active
				if e.ExpertBias {
					shared += in + fh
				}
			}
			sm := fh
			total += float64(e.Experts)*expert + router + shared + sm
			active += float64(e.TopK)*expert + router + shared + sm
			dense += (router+shared)*linTP + sm*small
			linF += (float64(e.TopK)*expert + router + shared) * twoTP
			s.addMoE(e.Experts, e.TopK, expert*lin/ftp) // experts always carry the format
			maxFFN = max(maxFFN, e.ExpertWidth, e.SharedWidth)
		}
		if mb := l.Mamba; mb != nil {
			ars++
			mambaL++
			di := float64(mb.DInner())
			gs := float64(mb.Groups * mb.StateSize)
			nh := float64(mb.Heads)
			inProj := fh * (2*di + 2*gs + nh)
			outProj := di * fh
			conv := (di + 2*gs) * float64(mb.ConvKernel)
			sm := 3*nh + di + fh
			if mb.ConvBias {
				sm += di + 2*gs
			}
			if mb.Bias {
				sm += 2*di + 2*gs + nh + fh
			}
			n := inProj + outProj
			total += n + conv + sm
			active += n + conv + sm
			dense += n*linTP + (conv+sm)*small
			linF += (n + conv) * twoTP
			scan += 6 * di * float64(mb.StateSize) / ftp
			st := float64(mb.ConvKernel-1)*(di+2*gs) + di*float64(mb.StateSize)
			state += st * stateBytes / ftp
		}
	}
	s.AttnLayers, s.MoELayers, s.MambaLayers, s.MaxFFN, s.Window = attnL, moeL, mambaL, maxFFN, window
	s.MLPLayers, s.AttnHeads, s.MaxQDim, s.MaxKVDim, s.ElemWidth = mlpL, heads, maxQ, maxKV, elem
	total += linN + linN16 + smN
	active += linN + linN16 + smN
	dense += linN*fmtTP + linN16*bf16TP + smN*small
	linF += (linN + linN16) * twoTP
	s.DenseBytes, s.LinearFLOPs, s.AttnFLOPs, s.SWAFLOPs = dense, linF, attnF, swaF
	s.KVBytes, s.SWAKVBytes, s.ScanFLOPs, s.StateBytes = kvB, swaKV, scan, state
	if tp > 1 {
		s.AllReduces = ars
	}
	s.TotalParams, s.ActiveParams = total, active
}

// storedBits is the width of a checkpoint's weights by config.json's
// dtype: 32 for float32, 16 for every other (bfloat16, float16, and a
// config that does not say, as HF checkpoints of the families we read
// hold 16-bit weights). The native engine reads bf16 and fp16 tensors in
// place (engine/weights.go) and float32 as float32.
func storedBits(dtype string) int {
	switch dtype {
	case "float32", "fp32", "f32":
		return 32
	}
	return 16
}

// finish adds the final norm, the embedding and the LM head (vocabulary
// sharded over TP) to the layer sums and derives the totals.
func finish(s *Summary, m *architecture.Model, p *Precision, tp int) {
	ftp := float64(tp)
	h := m.Hidden
	fh := float64(h)
	s.Hidden, s.Vocab = h, m.Vocab
	s.StoredBits = storedBits(m.DType)
	small := p.SmallBPW / 8
	total, active := s.TotalParams, s.ActiveParams
	fv := float64(m.Vocab)
	emb := fv * fh
	total += emb + fh
	active += emb + fh
	s.EmbedBytes = emb / ftp * p.EmbedBPW / 8
	s.HeadBytes = emb / ftp * p.HeadBPW / 8
	if !m.TiedEmbeddings {
		total += emb
		active += emb
	}
	s.DenseBytes += s.HeadBytes + fh*small
	s.HeadFLOPs = 2 * emb / ftp
	s.TotalParams, s.ActiveParams = total, active
	s.WeightBytes = s.DenseBytes + s.EmbedBytes
	if m.TiedEmbeddings {
		s.WeightBytes -= s.EmbedBytes // one shared tensor, counted as the head
	}
	for i := 0; i < s.nMoE; i++ {
		g := &s.moe[i]
		s.WeightBytes += g.Bytes * float64(g.Experts)
	}
	s.ARBytes = float64(s.AllReduces) * fh * 2
}

func (s *Summary) addMoE(experts, topk int, bytes float64) {
	for i := 0; i < s.nMoE; i++ {
		g := &s.moe[i]
		if g.Experts == experts && g.TopK == topk {
			g.Bytes += bytes
			return
		}
	}
	if s.nMoE < maxMoEGroups {
		s.moe[s.nMoE] = moeGroup{Experts: experts, TopK: topk, Bytes: bytes}
		s.nMoE++
		return
	}
	s.moe[maxMoEGroups-1].Bytes += bytes
}

// StreamedBytes returns the weight bytes one engine step reads for a batch
// of t tokens: the dense part plus, for MoE layers, the distinct experts the
// batch routes to in expectation, E·(1 − (1 − k/E)^t) under uniform routing.
func (s *Summary) StreamedBytes(t float64) float64 {
	b := s.DenseBytes
	if t < 1 {
		t = 1
	}
	for i := 0; i < s.nMoE; i++ {
		g := &s.moe[i]
		e := float64(g.Experts)
		touched := e * (1 - math.Pow(1-float64(g.TopK)/e, t))
		b += g.Bytes * touched
	}
	return b
}

// KVBytesPerSeq returns the KV bytes one sequence of ctx tokens holds.
func (s *Summary) KVBytesPerSeq(ctx float64) float64 {
	w := ctx
	if s.Window > 0 && float64(s.Window) < w {
		w = float64(s.Window)
	}
	return s.KVBytes*ctx + s.SWAKVBytes*w
}

// LayerSum is one layer's additive contribution to a Summary under a
// Compiled's precision, KV type and TP. A search that picks each layer from
// a small menu of shapes computes every option's LayerSum once and then
// prices a candidate with Assemble, in time linear in the layer count with
// a handful of additions per layer.
type LayerSum struct {
	total, active, dense, linF, attnF, swaF, scan, kv, swaKV, state float64
	moeBytes                                                        float64
	heads, elem                                                     float64
	attn, moe, mamba, ars, window, maxFFN, moeE, moeK               int32
	mlp, maxQ, maxKV                                                int32
}

// LayerSum returns the contribution of layer l of a model of width hidden.
func (c *Compiled) LayerSum(l *architecture.Layer, hidden int) LayerSum {
	var x Summary
	one := [1]architecture.Layer{*l}
	sumLayers(&x, one[:], hidden, &c.r.prec, c.r.kv, c.r.stateBytes, c.r.tp)
	ls := LayerSum{total: x.TotalParams, active: x.ActiveParams, dense: x.DenseBytes, linF: x.LinearFLOPs,
		attnF: x.AttnFLOPs, swaF: x.SWAFLOPs, scan: x.ScanFLOPs, kv: x.KVBytes, swaKV: x.SWAKVBytes, state: x.StateBytes,
		attn: int32(x.AttnLayers), moe: int32(x.MoELayers), mamba: int32(x.MambaLayers), ars: int32(x.AllReduces),
		window: int32(x.Window), maxFFN: int32(x.MaxFFN),
		heads: x.AttnHeads, elem: x.ElemWidth, mlp: int32(x.MLPLayers), maxQ: int32(x.MaxQDim), maxKV: int32(x.MaxKVDim)}
	if x.nMoE > 0 {
		ls.moeE, ls.moeK, ls.moeBytes = int32(x.moe[0].Experts), int32(x.moe[0].TopK), x.moe[0].Bytes
	}
	return ls
}

// Assemble fills s from the per-layer sums of a candidate whose global shape
// (hidden size, vocabulary, tied embeddings) is base's; base.Layers is
// ignored. It does not allocate. The result equals c.Summarize on the model
// with those layers.
func (c *Compiled) Assemble(s *Summary, base *architecture.Model, layers []*LayerSum) {
	*s = Summary{TP: c.r.tp, Layers: len(layers)}
	var total, active, dense, linF, attnF, swaF, scan, kv, swaKV, state float64
	var attn, moe, mamba, ars, window, maxFFN int32
	var mlp, maxQ, maxKV int32
	var heads, elem float64
	for _, x := range layers {
		heads += x.heads
		elem += x.elem
		mlp += x.mlp
		maxQ = max(maxQ, x.maxQ)
		maxKV = max(maxKV, x.maxKV)
		total += x.total
		active += x.active
		dense += x.dense
		linF += x.linF
		attnF += x.attnF
		swaF += x.swaF
		scan += x.scan
		kv += x.kv
		swaKV += x.swaKV
		state += x.state
		attn += x.attn
		moe += x.moe
		mamba += x.mamba
		ars += x.ars
		window = max(window, x.window)
		maxFFN = max(maxFFN, x.maxFFN)
		if x.moeE > 0 {
			s.addMoE(int(x.moeE), int(x.moeK), x.moeBytes)
		}
	}
	x := LayerSum{total: total, active: active, dense: dense, linF: linF, attnF: attnF, swaF: swaF, scan: scan, kv: kv, swaKV: swaKV, state: state,
		heads: heads, elem: elem, attn: attn, moe: moe, mamba: mamba, ars: ars, window: window, maxFFN: maxFFN, mlp: mlp, maxQ: maxQ, maxKV: maxKV}
	c.fill(s, base, &x, len(layers))
}

// fill writes the layer sums x of n layers into s (whose MoE groups are
// already set) and finishes it with base's global shape.
func (c *Compiled) fill(s *Summary, base *architecture.Model, x *LayerSum, n int) {
	s.Layers = n
	s.TotalParams, s.ActiveParams, s.DenseBytes, s.LinearFLOPs = x.total, x.active, x.dense, x.linF
	s.AttnFLOPs, s.SWAFLOPs, s.ScanFLOPs, s.KVBytes, s.SWAKVBytes, s.StateBytes = x.attnF, x.swaF, x.scan, x.kv, x.swaKV, x.state
	s.AttnLayers, s.MoELayers, s.MambaLayers, s.AllReduces = int(x.attn), int(x.moe), int(x.mamba), int(x.ars)
	s.Window, s.MaxFFN = int(x.window), int(x.maxFFN)
	s.MLPLayers, s.AttnHeads, s.MaxQDim, s.MaxKVDim, s.ElemWidth = int(x.mlp), x.heads, int(x.maxQ), int(x.maxKV), x.elem
	finish(s, base, &c.r.prec, c.r.tp)
}
