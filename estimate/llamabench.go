package estimate

// LlamaBench prices llama-bench's two tests on s under c (compiled for
// LlamaCPP): pp, prompt processing of prompt tokens from an empty context
// in n_batch steps (c's MaxBatchedTokens, 2048 by default) of n_ubatch
// passes with one logit row per step; and tg, gen tokens decoded one at a
// time from an empty context. It returns tokens per second of each (0 for
// a length of 0). No request overhead is added: llama-bench times
// llama_decode alone.
func (c *Compiled) LlamaBench(s *Summary, prompt, gen int) (ppTokS, tgTokS float64) {
	m := c.stepModel(s)
	if prompt > 0 {
		budget := float64(max(c.r.budgetToks, 1))
		t, done := 0.0, 0.0
		for n := float64(prompt); done < n; {
			chunk := min(budget, n-done)
			att := chunk * (done + (chunk+1)/2)
			t += m.time(Batch{Prefill: chunk, PrefillAtt: att, PrefillSeq: 1, PrefillDone: 1})
			done += chunk
		}
		ppTokS = float64(prompt) / t
	}
	if gen > 0 {
		// Every term is linear in the context: the mean step is the step at
		// the mean context.
		step := m.time(Batch{Decode: 1, DecodeCtx: float64(gen) / 2})
		tgTokS = 1 / step
	}
	return ppTokS, tgTokS
}
