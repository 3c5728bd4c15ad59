package cli

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

func init() {
	Register(&Command{
		Name:  "version",
		Usage: "",
		Short: "print the autocompress version and build facts",
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			return func(_ context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return Usagef("version takes no arguments, got %q", args)
				}
				v := "(devel)"
				rev := ""
				if bi, ok := debug.ReadBuildInfo(); ok {
					if bi.Main.Version != "" {
						v = bi.Main.Version
					}
					for _, s := range bi.Settings {
						if s.Key == "vcs.revision" {
							rev = s.Value
						}
					}
				}
				fmt.Fprintf(env.Stdout, "autocompress %s %s %s/%s %s\n", v, rev, runtime.GOOS, runtime.GOARCH, runtime.Version())
				return nil
			}
		},
	})
}
