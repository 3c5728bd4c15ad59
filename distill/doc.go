// Package distill recovers a pruned model by knowledge distillation from
// its parent on the native engine (method.md §5): logit distillation with
// forward KL(teacher ‖ student) at a temperature, scaled by T², optionally
// mixed with cross-entropy on the data, trained by package train's loop
// (AdamW, warm-up and cosine decay, clipping, packed rows, resumable
// checkpoints) through its loss seam (train.FromLogits with KD).
//
// # Vocabularies
//
// Teacher and student must share one tokenizer (SharedVocab compares every
// id's token and the segmentation of a probe text). Their embedding tables
// may be padded beyond the tokenizer's ids; the KL term then covers the
// shared ids only and padding rows get no distillation gradient.
//
// # Teacher logits
//
// ModelTeacher runs the teacher forward on every batch (the dense
// distribution). TopKCache keeps the K largest teacher logits of every
// position of every training row in a file keyed by the teacher's weights,
// the data and K, so that several students distilled on the same data (as
// Minitron++'s top-k candidate selection does) pay for the teacher once;
// KD then distils towards the teacher's distribution renormalised onto
// those K ids.
//
// # Resuming
//
// Run checkpoints every Train.CheckpointEvery steps (and on cancellation)
// through train.Trainer.Save; the checkpoint's tag is a hash of the
// teacher, the data and every loss and schedule setting, so Resume only
// continues the same run, and the resumed run's final weights are
// bit-identical to an uninterrupted run's (the KD loss is computed per
// position and summed in a fixed order, independent of the thread split).
package distill
