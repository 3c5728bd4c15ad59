package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/autocompress/autocompress/internal/output"
)

func init() {
	Register(&Command{
		Name:  "test-echo",
		Usage: "[--fail usage|data|exit] ARGS",
		Short: "test command",
		Flags: func(fs *flag.FlagSet) func(context.Context, *Env, []string) error {
			fail := fs.String("fail", "", "how to fail")
			return func(ctx context.Context, env *Env, args []string) error {
				switch *fail {
				case "usage":
					return Usagef("bad argument %q", "x")
				case "data":
					return errors.New("the data was bad")
				case "exit":
					return &ExitError{Code: 3, Msg: "validation failed"}
				case "cancel":
					return ctx.Err()
				case "exists":
					return fmt.Errorf("writing the report: %w", &output.ExistsError{Path: "/tmp/mine"})
				}
				env.Stdout.Write([]byte(strings.Join(args, " ")))
				return nil
			}
		},
	})
}

func TestRunExitCodes(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		args     []string
		code     int
		out, err string
	}{
		{"ok", context.Background(), []string{"test-echo", "a", "b"}, 0, "a b", ""},
		{"no args", context.Background(), nil, 2, "Commands:", ""},
		{"help", context.Background(), []string{"help"}, 0, "test-echo", ""},
		{"help cmd", context.Background(), []string{"help", "test-echo"}, 0, "usage: autocompress test-echo", ""},
		{"flag help", context.Background(), []string{"test-echo", "-h"}, 0, "-fail", ""},
		{"unknown cmd", context.Background(), []string{"nope"}, 2, "", `unknown command "nope"`},
		{"unknown flag", context.Background(), []string{"test-echo", "--bogus"}, 2, "", "flag provided but not defined"},
		{"usage error", context.Background(), []string{"test-echo", "--fail", "usage"}, 2, "", `bad argument "x"`},
		{"data error", context.Background(), []string{"test-echo", "--fail", "data"}, 1, "", "the data was bad"},
		{"exit error", context.Background(), []string{"test-echo", "--fail", "exit"}, 3, "", "validation failed"},
		{"exists", context.Background(), []string{"test-echo", "--fail", "exists"}, ExistsExit, "", "writing the report: /tmp/mine already exists; " + ForceHint},
		{"interrupted", cancelled, []string{"test-echo", "--fail", "cancel"}, 130, "", "interrupted"},
		{"version", context.Background(), []string{"version"}, 0, "autocompress", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Run(tc.ctx, tc.args, strings.NewReader(""), &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.out) {
				t.Errorf("stdout %q lacks %q", out.String(), tc.out)
			}
			if !strings.Contains(errb.String(), tc.err) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.err)
			}
		})
	}
}
