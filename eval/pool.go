package eval

import "math"

// Pool combines results scored with the same options (e.g. one per file):
// tokens, NLL, windows and bytes add up; perplexity is over all predicted
// tokens; bits per byte only when every part had text bytes. Nil parts are
// skipped; Pool of nothing is nil.
func Pool(parts ...*Result) *Result {
	var total *Result
	allText := true
	for _, r := range parts {
		if r == nil {
			continue
		}
		allText = allText && r.Bytes > 0
		if total == nil {
			c := *r
			total = &c
			continue
		}
		total.Tokens += r.Tokens
		total.NLL += r.NLL
		total.Windows += r.Windows
		total.Bytes += r.Bytes
	}
	if total == nil {
		return nil
	}
	total.Perplexity = math.Exp(total.NLL / float64(total.Tokens))
	total.BitsPerByte = math.NaN()
	if allText {
		total.BitsPerByte = total.NLL / math.Ln2 / float64(total.Bytes)
	} else {
		total.Bytes = 0
	}
	return total
}
