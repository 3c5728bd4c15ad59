package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestValidateConsumerClassFolds: every held-out figure of the consumer
// W4A16 kernel multipliers that validate-estimator prints is the one the
// fit gives — per source and metric, the multiplier fitted without the
// source and the source's median APE and bias before and after — and each
// fit's verdict (shipped, or why not) is printed beside it.
func TestValidateConsumerClassFolds(t *testing.T) {
	c, err := consumerCheck()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.class) == 0 {
		t.Fatal("no W4A16 class fits on the consumer rows")
	}
	var b bytes.Buffer
	c.printConsumer(&b)
	out := b.String()
	lines := 0
	for _, fit := range c.class {
		head := fmt.Sprintf("%s on GeForce, class %s: W4A16 kernel factor (dequant) × %.3f fitted on %d rows of %d source(s); ", fit.Engine, fit.Class, fit.Factor, fit.Rows, len(fit.Sources))
		if !strings.Contains(out, head) {
			t.Errorf("output lacks %q", head)
		}
		if !fit.Ship && !strings.Contains(out, head+"not shipped: "+fit.Why) {
			t.Errorf("%s %s: the verdict %q is not printed", fit.Engine, fit.Class, fit.Why)
		}
		for _, f := range fit.Folds {
			for i := range f.Before {
				x, y := f.Before[i], f.After[i]
				line := fmt.Sprintf("%-32s %-10s %5d %9.3f %8s %8s %8s %8s\n", f.Source, x.Metric, x.N, f.Factor, pct(x.Median), signedPct(x.Bias), pct(y.Median), signedPct(y.Bias))
				if !strings.Contains(out, line) {
					t.Errorf("output lacks the held-out line %q", line)
				}
				lines++
			}
		}
	}
	if lines == 0 {
		t.Error("no held-out line printed: no class has two sources")
	}
}
