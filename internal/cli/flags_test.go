package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
)

// TestNumericFlagsRanged walks every command's flags: every numeric flag
// is declared with a range (intVar, floatVar; seeds, whose every uint64 is
// valid, are the exception), every int range has a meaningful upper end
// (one of the bounds of flags.go, far below the int's), and a value outside
// it, given alone, exits 2 with a message naming the flag, before the
// command does any work.
func TestNumericFlagsRanged(t *testing.T) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	checked := 0
	for _, name := range names {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		commands[name].Flags(fs)
		fs.VisitAll(func(fl *flag.Flag) {
			var bad []string
			switch v := fl.Value.(type) {
			case *intFlag:
				if v.min > math.MinInt {
					bad = append(bad, fmt.Sprint(v.min-1))
				}
				if v.max > maxTrainTokens {
					t.Errorf("%s --%s has no meaningful upper bound (%d): give it one of flags.go's", name, fl.Name, v.max)
				}
				bad = append(bad, fmt.Sprint(v.max+1), fmt.Sprint(math.MaxInt64), "1.5")
			case *floatFlag:
				if !math.IsInf(v.min, -1) {
					if v.minOpen {
						bad = append(bad, fmt.Sprint(v.min))
					} else {
						bad = append(bad, fmt.Sprint(v.min-1))
					}
				}
				if !math.IsInf(v.max, 1) {
					if v.maxOpen {
						bad = append(bad, fmt.Sprint(v.max))
					} else {
						bad = append(bad, fmt.Sprint(v.max+0.5))
					}
				}
				bad = append(bad, "NaN", "inf")
			default:
				switch typ := fmt.Sprintf("%T", fl.Value); typ {
				case "*flag.intValue", "*flag.int64Value", "*flag.uintValue", "*flag.float64Value", "*flag.durationValue":
					t.Errorf("%s --%s is a %s without a range: declare it with intVar/floatVar", name, fl.Name, typ)
				}
				return
			}
			for _, b := range bad {
				var out, errb bytes.Buffer
				code := Run(context.Background(), []string{name, "--" + fl.Name + "=" + b}, strings.NewReader(""), &out, &errb)
				if code != 2 || !strings.Contains(errb.String(), fl.Name) || !strings.Contains(errb.String(), "want") {
					t.Errorf("%s --%s=%s: exit %d, %q; want 2 and a message naming the flag and what is valid", name, fl.Name, b, code, errb.String())
				}
				checked++
			}
		})
	}
	t.Logf("%d out-of-range values checked", checked)
	if checked < 50 {
		t.Errorf("only %d out-of-range values checked", checked)
	}
}

func TestIntFlagRange(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	n := intArg(fs, "n", 0, 1, 8, "")
	f := floatArg(fs, "f", 0, fraction, "")
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--n", "1"}, true}, {[]string{"--n", "8"}, true}, {[]string{"--n", "0"}, false}, {[]string{"--n", "9"}, false},
		{[]string{"--n", "x"}, false}, {[]string{"--f", "1"}, true}, {[]string{"--f", "0.5"}, true}, {[]string{"--f", "0"}, false},
		{[]string{"--f", "-0.2"}, false}, {[]string{"--f", "1.01"}, false}, {[]string{"--f", "NaN"}, false},
	} {
		err := fs.Parse(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v", tc.args, err)
		}
	}
	if *n != 8 || *f != 0.5 {
		t.Errorf("values %d %g", *n, *f)
	}
}
