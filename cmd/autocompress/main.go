// Command autocompress shrinks a large language model to fit one deployment:
// a named GPU or CPU, a serving engine and a workload.
//
// Run "autocompress help" for the list of subcommands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/autocompress/autocompress/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
