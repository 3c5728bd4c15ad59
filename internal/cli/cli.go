// Package cli implements the autocompress command line: one file per
// subcommand, each registering a *Command from its init function.
//
// Commands parse their flags into locals, validate arguments before doing any
// work, write to the injected writers (so tests can call Run directly) and
// return an error; Run maps errors to exit codes:
//
//	0  success
//	1  the command failed (bad input data, a failed check, an I/O error,
//	   an output that already exists without --force)
//	2  usage error (unknown command or flag, missing or invalid argument)
//	130 interrupted
//
// An output that exists is the one *output.ExistsError of every package,
// wrapped or not; Run gives it exit status ExistsExit and the hint
// ForceHint, whichever command and whichever of its outputs it is.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/autocompress/autocompress/internal/output"
)

// Env carries the standard streams of one invocation.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Command is one subcommand.
type Command struct {
	Name  string // e.g. "estimate"
	Usage string // the arguments after the name, e.g. "--model NAME --gpu NAME [flags]"
	Short string // one line for the command list
	Long  string // paragraphs shown by "autocompress help NAME"
	// Flags declares the command's flags on fs and returns the function that
	// runs the command once fs has been parsed. Binding flags to locals of the
	// closure keeps every invocation independent.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error
}

var commands = map[string]*Command{}

// Register adds a command; it is called from init functions.
func Register(c *Command) {
	if _, dup := commands[c.Name]; dup {
		panic("cli: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// UsageError marks an error in how the command was called (exit status 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError with a formatted message.
func Usagef(format string, a ...any) error { return &UsageError{Msg: fmt.Sprintf(format, a...)} }

// ExitError carries an explicit exit status with its message (which may be empty
// when the command already printed what went wrong).
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// Run runs the command line args (without the program name) and returns the
// process exit status.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	env := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" && len(args) == 1 {
		printUsage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "help" {
		c, ok := commands[args[1]]
		if !ok {
			fmt.Fprintf(stderr, "autocompress: unknown command %q\n", args[1])
			printUsage(stderr)
			return 2
		}
		printCommandHelp(stdout, c, nil)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "autocompress: unknown command %q\n\n", args[0])
		printUsage(stderr)
		return 2
	}
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := c.Flags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(stdout, c, fs)
			return 0
		}
		fmt.Fprintf(stderr, "autocompress %s: %v\n", c.Name, err)
		fmt.Fprintf(stderr, "usage: autocompress %s %s\nrun 'autocompress %s -h' for the flags\n", c.Name, c.Usage, c.Name)
		return 2
	}
	err := run(ctx, env, fs.Args())
	return exitCode(ctx, stderr, c.Name, err)
}

// ExistsExit is the exit status of a command that refused to replace an
// existing output (an *output.ExistsError) because --force was not given.
const ExistsExit = 1

// ForceHint follows the message of an *output.ExistsError.
const ForceHint = "choose another path or pass --force to replace it"

func exitCode(ctx context.Context, stderr io.Writer, name string, err error) int {
	if err == nil {
		return 0
	}
	var ue *UsageError
	var ee *ExitError
	var xe *output.ExistsError
	switch {
	case errors.As(err, &xe):
		fmt.Fprintf(stderr, "autocompress %s: %v; %s\n", name, err, ForceHint)
		return ExistsExit
	case errors.As(err, &ee):
		if ee.Msg != "" {
			fmt.Fprintf(stderr, "autocompress %s: %s\n", name, ee.Msg)
		}
		return ee.Code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "autocompress %s: %v\n", name, err)
		fmt.Fprintf(stderr, "run 'autocompress %s -h' for usage\n", name)
		return 2
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		fmt.Fprintf(stderr, "autocompress %s: interrupted\n", name)
		return 130
	default:
		fmt.Fprintf(stderr, "autocompress %s: %v\n", name, err)
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "autocompress shrinks a language model to fit a GPU, a serving engine and a workload.\n\n")
	fmt.Fprintf(w, "Usage: autocompress <command> [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-20s %s\n", n, commands[n].Short)
	}
	fmt.Fprintf(w, "\nRun 'autocompress help <command>' for details.\n")
}

func printCommandHelp(w io.Writer, c *Command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: autocompress %s %s\n\n%s\n", c.Name, c.Usage, c.Short)
	if c.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Long))
	}
	if fs == nil {
		fs = flag.NewFlagSet(c.Name, flag.ContinueOnError)
		c.Flags(fs)
	}
	fmt.Fprintf(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// flagGiven reports whether the flag named name was set on the command line
// (so that an explicit default-looking value, such as 0, can be told from
// an absent flag).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			given = true
		}
	})
	return given
}
