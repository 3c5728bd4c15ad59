package distill_test

import (
	"context"
	"fmt"
	"math"

	"github.com/autocompress/autocompress/distill"
	"github.com/autocompress/autocompress/train"
)

// teacher returns fixed logits.
type teacher []float32

func (t teacher) Logits(context.Context, *train.Batch) (*distill.TeacherLogits, error) {
	return &distill.TeacherLogits{Dense: t, Vocab: len(t)}, nil
}

// The KD loss of one position with two ids: the teacher puts 3/4 on id 0,
// the student is uniform. At T = 1 the loss is KL = 3/4·ln(3/2) + 1/4·ln(1/2)
// and the gradient q − p.
func ExampleKD() {
	kd := &distill.KD{Teacher: teacher{float32(math.Log(3)), 0}, Temperature: 1, KDWeight: 1, Shared: 2}
	d := make([]float32, 2)
	loss, _ := kd.Logits(context.Background(), []float32{0, 0}, &train.Batch{B: 1, T: 1, Targets: []int32{0}}, 2, d)
	fmt.Printf("loss %.4f, gradient [%.2f %.2f]\n", loss, d[0], d[1])
	// Output: loss 0.1308, gradient [-0.25 0.25]
}
