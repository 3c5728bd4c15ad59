// Package pipeline chains the stages of a compression run — importance,
// search, prune, distill, eval, validate, measure, report — in one run
// directory, so that one command takes a parent checkpoint to a deployed,
// measured child and its report.
//
// Each stage writes into its own directory (NN-name) with a manifest of what
// it was run from: its parameters, the content hash of every outside file it
// read, and the output hash of every stage it depends on. A rerun reuses each
// stage whose manifest still matches and whose outputs are intact, so a run
// after a failure, an interrupt or a changed budget repeats only what must be
// repeated, and says which stages it reused and why the others ran. Because a
// dependency enters a stage's key through its output hash, a rerun upstream
// stage that produces the same output (an unchanged plan after a budget that
// did not bind changed) does not invalidate the stages after it.
//
// Stages write into a temporary directory that is renamed into place when
// they succeed; a cancelled context (Ctrl-C) or a failure leaves only the
// stages that finished, and a killed run's temporary directories are removed
// by the next run. Progress of every stage reaches the caller through one
// progress.Func (stage k of n, its start, reuse, end or failure, the
// stage's own counts with the units a resumed stage had done, and its
// notes); the package writes nothing to a terminal (progress.Terminal draws).
//
// Budgets are met when measured, not only when estimated, in three ways on
// a target this machine can serve (cpu-local, native). The search keeps a
// margin for the estimator's error (budgets.margin; default its calibrated
// held-out error). The search stage then prunes its choice and measures it
// with bench-serve before the expensive distillation (serving costs do not
// depend on the weights); where a budget is missed it searches again with
// that budget scaled by estimated/measured, at most measure.rounds times,
// and records every round in rounds.json and the report. The measure stage
// serves the final child under the settings the search chose (its sequence
// limit, context and prompt budget per step, from serving.json).
//
// Every measurement, the search's checks and the final one, is
// measure.invocations separate bench-serve processes (default 3,
// measure.gap_s apart), each with its own warm-up and repeats, combined by
// servebench.Combine. Budgets are judged on the conservative figure, the
// worst invocation (the largest latency or memory, the smallest
// throughput), and the re-choice scales a missed budget by estimated/worst:
// on a shared machine the same child's single-stream TPOT differed by up
// to 2.7× between invocations while the runs of one agreed to 5–9 %, so
// one invocation is one draw. The report shows the invocations' range and
// median and flags a metric whose invocations spread more than 10 % as
// unstable on this machine.
package pipeline
