package distill

import (
	"fmt"

	"github.com/autocompress/autocompress/parent"
	"github.com/autocompress/autocompress/tokenizer"
)

// ParentSplitPrefix names a part of the embedded parent's text as data
// (parent.DataPrefix): "parent:train-sample", "parent:validation" (or
// "parent:val"), "parent:test", "parent:train".
const ParentSplitPrefix = parent.DataPrefix

// VocabError reports a teacher and student whose tokenizers or
// vocabularies cannot be distilled between.
type VocabError struct{ Msg string }

func (e *VocabError) Error() string { return "distill: " + e.Msg }

// SharedVocab checks that the teacher's and the student's tokenizers are
// the same (every id maps to the same token) and returns the number of ids
// they share: the tokenizer's. Model vocabularies (embedding rows) may be
// larger than the tokenizer's, by padding rows that no text produces; the
// note then says so (distillation covers the shared ids only). teacherVocab
// and studentVocab are the models' vocab_size.
func SharedVocab(teacher, student *tokenizer.Tokenizer, teacherVocab, studentVocab int) (shared int, note string, err error) {
	if teacher.VocabSize() != student.VocabSize() {
		return 0, "", &VocabError{fmt.Sprintf("the teacher's tokenizer has %d ids and the student's %d: teacher and student must share one tokenizer", teacher.VocabSize(), student.VocabSize())}
	}
	n := teacher.VocabSize()
	for id := range n {
		a, aok := teacher.Token(id)
		b, bok := student.Token(id)
		if a != b || aok != bok {
			return 0, "", &VocabError{fmt.Sprintf("tokenizers differ at id %d: %q in the teacher's, %q in the student's: teacher and student must share one tokenizer", id, a, b)}
		}
	}
	const probe = "The President said: \"We shall not fail, 1790–2021.\"\n\tIt is a truth universally acknowledged."
	pa, errA := teacher.Encode(probe, false)
	pb, errB := student.Encode(probe, false)
	if errA != nil || errB != nil || len(pa) != len(pb) {
		return 0, "", &VocabError{"the tokenizers have the same tokens but split text differently (merges or pre-tokenizer differ): teacher and student must share one tokenizer"}
	}
	for i := range pa {
		if pa[i] != pb[i] {
			return 0, "", &VocabError{"the tokenizers have the same tokens but split text differently (merges or pre-tokenizer differ): teacher and student must share one tokenizer"}
		}
	}
	if teacherVocab < n || studentVocab < n {
		return 0, "", &VocabError{fmt.Sprintf("the tokenizer has %d ids but the teacher's vocab_size is %d and the student's %d: a model smaller than its tokenizer cannot score every id", n, teacherVocab, studentVocab)}
	}
	if teacherVocab != n || studentVocab != n {
		note = fmt.Sprintf("vocabularies differ only by padding: the tokenizer has %d ids, the teacher %d embedding rows and the student %d; distilling over the %d shared ids (padding rows get no distillation gradient)", n, teacherVocab, studentVocab, n)
	}
	return n, note, nil
}
