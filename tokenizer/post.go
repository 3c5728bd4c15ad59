package tokenizer

// A postProcessor adds special tokens (BOS/EOS, CLS/SEP) around an encoded
// single sequence.
type postProcessor interface {
	process(ids []int) []int
	// bounds returns the ids placed before and after the sequence.
	bounds() (before, after []int)
}

// templateProcessor is TemplateProcessing restricted to the "single"
// template: a list of special-token id groups and one sequence slot.
type templateProcessor struct {
	before, after []int
}

func (t *templateProcessor) process(ids []int) []int {
	out := make([]int, 0, len(t.before)+len(ids)+len(t.after))
	out = append(out, t.before...)
	out = append(out, ids...)
	return append(out, t.after...)
}

func (t *templateProcessor) bounds() (before, after []int) { return t.before, t.after }

type sequenceProcessor []postProcessor

func (seq sequenceProcessor) process(ids []int) []int {
	for _, p := range seq {
		ids = p.process(ids)
	}
	return ids
}

func (seq sequenceProcessor) bounds() (before, after []int) {
	for _, p := range seq {
		b, a := p.bounds()
		before = append(append([]int(nil), b...), before...)
		after = append(after, a...)
	}
	return before, after
}
