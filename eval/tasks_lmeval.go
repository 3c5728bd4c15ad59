package eval

import "io"

// The tasks added for the paper's eight-test average (lm-evaluation-harness
// names), registered beside the others in TaskKinds: ARC, Winogrande,
// TruthfulQA and IFEval.
func init() {
	arc := func(task string) func(string) ([]*Task, error) {
		return one(func(p string) (*Task, error) {
			return readFileTask(p, func(name string, r io.Reader) (*Task, error) { return ParseARC(task, name, r) })
		})
	}
	TaskKinds["arc_challenge"] = TaskKind{"ARC-Challenge: AI2's ARC-Challenge-Test.jsonl (question.stem, question.choices, answerKey): acc, acc_norm", arc("arc_challenge")}
	TaskKinds["arc_easy"] = TaskKind{"ARC-Easy: AI2's ARC-Easy-Test.jsonl: acc, acc_norm", arc("arc_easy")}
	TaskKinds["winogrande"] = TaskKind{"Winogrande: JSON lines {sentence with _, option1, option2, answer} (or NAME-labels.lst beside it), partial scoring: acc", one(LoadWinogrande)}
	TaskKinds["truthfulqa"] = TaskKind{"TruthfulQA MC: mc_task.json, both truthfulqa_mc1 and truthfulqa_mc2", LoadTruthfulQA}
	TaskKinds["truthfulqa_mc1"] = TaskKind{"TruthfulQA MC1: mc_task.json, acc of the single true answer", pick(LoadTruthfulQA, "truthfulqa_mc1")}
	TaskKinds["truthfulqa_mc2"] = TaskKind{"TruthfulQA MC2: mc_task.json, probability mass on the true answers", pick(LoadTruthfulQA, "truthfulqa_mc2")}
	TaskKinds["ifeval"] = TaskKind{"IFEval (generation): google-research's input_data.jsonl; prompt- and instruction-level accuracy, strict and loose",
		one(func(p string) (*Task, error) {
			ps, err := LoadIFEval(p)
			if err != nil {
				return nil, err
			}
			return IFEvalTask(p, ps), nil
		})}
}

// pick keeps the task named name of what load gives.
func pick(load func(string) ([]*Task, error), name string) func(string) ([]*Task, error) {
	return func(p string) ([]*Task, error) {
		ts, err := load(p)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if t.Name == name {
				return []*Task{t}, nil
			}
		}
		return nil, &FormatError{File: p, Msg: "no " + name + " task in the file"}
	}
}
