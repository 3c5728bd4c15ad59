// Package proxy measures, without training, how much of its parent a pruned
// child keeps: the quality proxy an architecture search ranks candidates by
// (method.md §9 step 3: "KL or LM loss to the parent on held-out text").
//
// Child builds a pruned child in memory from a parent engine model and a
// prune.Plan, with the selection semantics of prune.Resolve and
// prune.Layout.Map, so it is the same model that "autocompress prune" writes
// and engine.Load reads back (TestChildEqualsPrunedCheckpoint).
//
// KL runs parent and child over packed rows (T+1 token ids each: inputs
// row[:T], targets row[1:]) and returns the mean forward KL(parent ‖ child)
// per token, the child's (and parent's) cross-entropy and the tokens spent.
// To score many candidates on the same rows, NewReference runs the parent
// once and keeps its next-token distributions; Reference.Score then costs
// one child pass per candidate:
//
//	ref, err := proxy.NewReference(ctx, parent, rows, proxy.Options{})
//	for _, plan := range candidates {
//		child, err := proxy.Child(parent, plan)
//		res, err := ref.Score(ctx, child, proxy.Options{})
//		// res.KL, res.Loss, res.Spent
//	}
//
// Per token, with p the parent's softmax and z the child's logits,
// KL = Σ p log p − Σ p z + logsumexp(z); Σ p log p is computed once per
// reference, so a child costs its forward pass plus one exp pass and one
// dot product over the vocabulary per token. On the embedded parent a
// candidate (Child plus Score on 16 rows × 128 tokens) costs about 0.8–1.0
// parent forward passes over the same tokens (BenchmarkCandidate).
//
// Spearman and Kendall judge a proxy against the quality it stands for;
// package search's TestRankCorrelation (behind -rankcorr) ranks ten
// children of the embedded parent by each proxy, the brief training of
// Minitron++'s top-k included, and by their loss after recovery by
// distillation; the results are in PROXIES.md.
package proxy
