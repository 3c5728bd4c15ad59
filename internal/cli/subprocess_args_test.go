package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/autocompress/autocompress/estimate/nativecal"
	"github.com/autocompress/autocompress/pipeline"
	"github.com/autocompress/autocompress/servebench"
	"github.com/autocompress/autocompress/workload"
)

// The packages that run autocompress in a child process build its command
// line themselves; each must parse with the command's own flags, so that a
// renamed flag breaks this test rather than a 15-minute sweep.
func TestSubprocessArgsParse(t *testing.T) {
	c := pipeline.DemoConfig()
	w := workload.FixedClosed(128, 64, 4)
	w.NumRequests, w.ContextLimit = 32, 192
	preset := c
	preset.Workload.Name = "chat"
	for _, args := range [][]string{
		nativecal.BenchServeArgs("DIR", nativecal.Point{ISL: 128, OSL: 64, Conc: 4, Requests: 32}, servebench.Options{Repeats: 3, MaxWarmup: 3}),
		pipeline.BenchServeArgs("DIR", &c, &w, servebench.Options{MaxNumSeqs: 2, PrefillTokens: 512}),
		pipeline.BenchServeArgs("DIR", &preset, &w, servebench.Options{}),
	} {
		cmd, ok := commands[args[0]]
		if !ok {
			t.Fatalf("%v: no command %q", args, args[0])
		}
		fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cmd.Flags(fs)
		if err := fs.Parse(args[1:]); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}
