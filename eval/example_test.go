package eval_test

import (
	"fmt"

	"github.com/autocompress/autocompress/eval"
)

// The harness's MMLU prompt: the subject's description, the dev shots with
// their answers, then the question ending in "Answer:"; the choices are
// " A" to " D".
func ExampleMMLUPrompt() {
	shot := eval.MMLURow{Question: "1+1?", Choices: [4]string{"1", "2", "3", "4"}, Answer: 1}
	q := eval.MMLURow{Question: "2+2?", Choices: [4]string{"3", "4", "5", "6"}, Answer: 1}
	fmt.Println(eval.MMLUPrompt("elementary_mathematics", []eval.MMLURow{shot}, q))
	// Output:
	// The following are multiple choice questions (with answers) about elementary mathematics.
	//
	// 1+1?
	// A. 1
	// B. 2
	// C. 3
	// D. 4
	// Answer: B
	//
	// 2+2?
	// A. 3
	// B. 4
	// C. 5
	// D. 6
	// Answer:
}

// A quiz(6) answer in its full form: optional text kept, the first of the
// alternatives taken.
func ExampleQuizExpand() {
	fmt.Println(eval.QuizExpand("{The }Merchant{ of Venice}"))
	fmt.Println(eval.QuizExpand("Cal{if{ornia}}|CA"))
	// Output:
	// The Merchant of Venice
	// California
}
