package workload

import (
	"fmt"
	"strings"
)

// Context is the per-request context a run uses and where it comes from.
type Context struct {
	// Tokens is the context limit (the server's max model length).
	Tokens int
	// Source says where Tokens comes from, for the output: "set by the
	// user", "the workload's limit", "the model's max_position_embeddings
	// (the workload allows N)", "input + output".
	Source string
	// Longest is the longest request the workload can draw (input max +
	// output max).
	Longest int
	// Clipped is true when Longest exceeds Tokens: Sample then shortens
	// the longest requests (prompt to Tokens−1, output to what is left).
	Clipped bool
	// Long is true when Tokens exceeds the model's positions (only with
	// allowLong).
	Long bool
}

// ContextError is a run whose requests would go past the positions a
// model was trained on, or be clipped to fit them, without the user asking.
// Its message says how to fix it; the options a caller has to name (a flag
// or a config field) are the caller's to give, in ContextFlag and AllowFlag.
type ContextError struct {
	What         string // "requests" or the context named by the caller
	Tokens       int    // tokens the run needs
	MaxPositions int
	// Clip is set when the run would silently shorten the workload's
	// requests to the model's positions.
	Clip bool
	// ContextFlag is the option that sets the context limit, for the
	// message ("" when the caller has none).
	ContextFlag string
	// AllowFlag is the option that allows a context past the model's
	// positions ("" when the caller has none: the message does not offer
	// one).
	AllowFlag string
}

func (e *ContextError) Error() string {
	if e.Clip {
		fixes := []string{"give a shorter workload"}
		if e.ContextFlag != "" {
			fixes = append(fixes, "set the context limit explicitly ("+e.ContextFlag+" N) to clip them knowingly")
		}
		if e.AllowFlag != "" {
			fixes = append(fixes, "pass "+e.AllowFlag+" to run past the model's positions")
		}
		fix := fixes[len(fixes)-1]
		if len(fixes) > 1 {
			fix = strings.Join(fixes[:len(fixes)-1], ", ") + " or " + fix
		}
		return fmt.Sprintf("%s reach %d tokens but the model has %d positions (max_position_embeddings): they would be clipped to fit, "+
			"changing what is measured; %s", e.What, e.Tokens, e.MaxPositions, fix)
	}
	fix := "shorten it"
	if e.AllowFlag != "" {
		fix += " or pass " + e.AllowFlag + " to run past them"
	}
	verb := "needs"
	if e.What == "requests" {
		verb = "need"
	}
	return fmt.Sprintf("%s %s %d tokens but the model has %d positions (max_position_embeddings); %s",
		e.What, verb, e.Tokens, e.MaxPositions, fix)
}

// ContextRule is what FitContext checks a workload against.
type ContextRule struct {
	// MaxPositions is the model's max_position_embeddings (0: unknown, no check).
	MaxPositions int
	// Explicit says the user set w.ContextLimit (a --context flag).
	Explicit bool
	// AllowLong lets the context run past MaxPositions (--allow-long-context).
	AllowLong bool
	// What names the requests in messages ("--isl 200000 + --osl 128";
	// default "requests"); ContextFlag is the option that sets the limit
	// and AllowFlag the one that sets AllowLong, for the messages ("":
	// none to offer).
	What, ContextFlag, AllowFlag string
}

// FitContext resolves and checks the context of a run of w on a model
// trained on r.MaxPositions positions: the one rule of every command that
// runs or prices requests (allowLong, explicit and maxPositions below are
// the rule's fields).
//
//   - explicit (the user set w.ContextLimit): that limit; over maxPositions
//     it is a *ContextError unless allowLong.
//   - a workload's own limit (a preset's ContextLimit): capped at
//     maxPositions (engines default max_model_len to the model's), unless
//     allowLong.
//   - no limit: input max + output max; over maxPositions it is a
//     *ContextError unless allowLong.
//
// When the workload's longest request exceeds a context the user did not
// set, its requests would be clipped silently: that is a *ContextError too
// (Clip set) unless allowLong, which keeps the workload's own limit. The
// resolved limit is stored in w.ContextLimit.
func (w *Workload) FitContext(r ContextRule) (Context, error) {
	maxPositions, explicit, allowLong, what := r.MaxPositions, r.Explicit, r.AllowLong, r.What
	if what == "" {
		what = "requests"
	}
	c := Context{Longest: w.Longest()}
	over := func(n int) bool { return maxPositions > 0 && n > maxPositions }
	switch {
	case explicit && w.ContextLimit > 0:
		c.Tokens, c.Source = w.ContextLimit, "set by the user"
		if over(c.Tokens) && !allowLong {
			return c, &ContextError{What: fmt.Sprintf("the context limit %d", c.Tokens), Tokens: c.Tokens, MaxPositions: maxPositions, AllowFlag: r.AllowFlag}
		}
	case w.ContextLimit > 0:
		c.Tokens, c.Source = w.ContextLimit, "the workload's limit"
		if w.Name != "" {
			c.Source = "the " + w.Name + " workload's limit"
		}
		if over(c.Tokens) && !allowLong {
			c.Source = fmt.Sprintf("the model's max_position_embeddings (%s is %d)", c.Source, c.Tokens)
			c.Tokens = maxPositions
		}
	default:
		c.Tokens, c.Source = c.Longest, "input + output"
		if over(c.Tokens) && !allowLong {
			return c, &ContextError{What: what, Tokens: c.Tokens, MaxPositions: maxPositions, AllowFlag: r.AllowFlag}
		}
	}
	c.Clipped = c.Longest > c.Tokens
	if c.Clipped && !explicit && over(c.Longest) {
		return c, &ContextError{What: what, Tokens: c.Longest, MaxPositions: maxPositions, Clip: true, ContextFlag: r.ContextFlag, AllowFlag: r.AllowFlag}
	}
	c.Long = over(c.Tokens)
	w.ContextLimit = c.Tokens
	return c, nil
}
