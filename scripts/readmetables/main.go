// Command readmetables rewrites the README's tables that commands produce
// from the commands printed beside them, so that a table cannot drift from
// what its commands print (issue 17: the published-config search table was
// made with no margin while the CLI defaults to --margin auto).
//
// A generated table sits in a region of README.md between the lines
//
//	<!-- readmetables NAME begin ... -->
//	<!-- readmetables NAME end -->
//
// The region holds the commands, indented four spaces, and then the table;
// readmetables keeps everything up to the last command and rewrites the
// table after it. Only tables of estimates are generated: measured tables
// cannot be reproduced by a test and stay labelled with their host and date.
//
// The regions:
//
//   - search-configs: every "autocompress search" command of the region
//     (with $C the shared configs folder, ../shared/data/configs) is run
//     through the CLI as printed and again with --strategy minitron; a row
//     per run gives the chosen shape, settings and estimated costs, or why
//     there is none.
//
// Run from the repository root:
//
//	go run ./scripts/readmetables          # rewrite README.md
//	go run ./scripts/readmetables -check   # exit 1 when README.md differs
//
// TestReadmeTablesMatchTheirCommands runs the check (it skips without the
// shared configs).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/autocompress/autocompress/estimate"
	"github.com/autocompress/autocompress/internal/cli"
	"github.com/autocompress/autocompress/internal/output"
	"github.com/autocompress/autocompress/internal/shareddata"
	"github.com/autocompress/autocompress/search"
)

func main() {
	readme := flag.String("readme", "README.md", "the README to rewrite")
	configs := flag.String("configs", "", "the folder $C names in the commands (default: the shared data's configs)")
	check := flag.Bool("check", false, "do not rewrite: exit 1 when the README's tables differ from what their commands produce")
	flag.Parse()
	if err := run(*readme, *configs, *check); err != nil {
		fmt.Fprintln(os.Stderr, "readmetables:", err)
		os.Exit(1)
	}
}

func run(readme, configs string, check bool) error {
	if configs == "" {
		p, ok := shareddata.Path("configs")
		if !ok {
			return errors.New("the shared configs folder (../shared/data/configs) is absent: give -configs")
		}
		configs = p
	}
	old, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "readmetables-") //output:not-an-output: scratch for the commands' --out, removed on return
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	updated, err := Rewrite(context.Background(), old, Env{Configs: configs, Scratch: tmp})
	if err != nil {
		return err
	}
	if bytes.Equal(old, updated) {
		return nil
	}
	if check {
		return fmt.Errorf("%s differs from what its commands produce:\n%s\nrun go run ./scripts/readmetables to rewrite it", readme, Diff(old, updated))
	}
	return output.WriteFile(readme, updated, true) // replaced atomically, keeping its mode
}

// Env is what the commands run with.
type Env struct {
	Configs string // the folder $C names
	Scratch string // a folder for the commands' --out
}

// generators maps a region's name to what rewrites its table from its
// commands.
var generators = map[string]func(ctx context.Context, env Env, commands []string) (string, error){
	"search-configs": searchConfigs,
}

var (
	beginLine = regexp.MustCompile(`(?m)^<!-- readmetables (\S+) begin.*-->\n`)
	command   = regexp.MustCompile(`(?m)^    (autocompress .*)\n`)
)

// Rewrite returns readme with the table of every region rewritten from the
// region's commands.
func Rewrite(ctx context.Context, readme []byte, env Env) ([]byte, error) {
	var out bytes.Buffer
	rest := readme
	n := 0
	for {
		loc := beginLine.FindSubmatchIndex(rest)
		if loc == nil {
			break
		}
		name := string(rest[loc[2]:loc[3]])
		gen, ok := generators[name]
		if !ok {
			return nil, fmt.Errorf("region %q: no such table (known: search-configs)", name)
		}
		out.Write(rest[:loc[1]])
		rest = rest[loc[1]:]
		end := []byte("<!-- readmetables " + name + " end -->\n")
		i := bytes.Index(rest, end)
		if i < 0 {
			return nil, fmt.Errorf("region %q has no end line %q", name, bytes.TrimSpace(end))
		}
		region := rest[:i]
		cmds := command.FindAllSubmatchIndex(region, -1)
		if len(cmds) == 0 {
			return nil, fmt.Errorf("region %q holds no commands (lines indented four spaces, starting with autocompress)", name)
		}
		var lines []string
		for _, c := range cmds {
			lines = append(lines, string(region[c[2]:c[3]]))
		}
		table, err := gen(ctx, env, lines)
		if err != nil {
			return nil, fmt.Errorf("region %q: %w", name, err)
		}
		out.Write(region[:cmds[len(cmds)-1][1]])
		out.WriteString("\n" + table + "\n") // a blank line ends the table before the end line
		out.Write(end)
		rest = rest[i+len(end):]
		n++
	}
	if n == 0 {
		return nil, errors.New("no readmetables region")
	}
	out.Write(rest)
	return out.Bytes(), nil
}

// Diff lists the lines of a and b that differ, in order, marked - and +.
func Diff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	var d strings.Builder
	i, j := 0, 0
	for i < len(al) || j < len(bl) {
		switch {
		case i < len(al) && j < len(bl) && al[i] == bl[j]:
			i, j = i+1, j+1
		default:
			// Resynchronise on the next line of a that b holds later.
			k := -1
			if i < len(al) {
				for jj := j; jj < len(bl); jj++ {
					if bl[jj] == al[i] {
						k = jj
						break
					}
				}
			}
			if k < 0 {
				if i < len(al) {
					fmt.Fprintf(&d, "- %s\n", al[i])
					i++
				} else {
					fmt.Fprintf(&d, "+ %s\n", bl[j])
					j++
				}
				continue
			}
			for ; j < k; j++ {
				fmt.Fprintf(&d, "+ %s\n", bl[j])
			}
		}
	}
	return d.String()
}

// summary is the part of search --json that the table shows.
type summary struct {
	Strategy      string `json:"strategy"`
	ParentMeets   bool   `json:"parent_meets_budgets"`
	Shape         string `json:"shape"`
	BindingBudget string `json:"binding_budget"`
	Chosen        struct {
		Settings struct {
			Precision   string  `json:"precision"`
			KVDType     string  `json:"kv_dtype"`
			MemFraction float64 `json:"mem_fraction"`
			MaxNumSeqs  int     `json:"max_num_seqs"`
		} `json:"settings"`
		Quality float64 `json:"quality"`
		Costs   struct {
			MemoryBytes float64 `json:"memory_bytes"`
			E2E         float64 `json:"e2e_s"`
			Params      float64 `json:"params"`
		} `json:"costs"`
	} `json:"chosen"`
}

// searchConfigs runs each search command as printed and with --strategy
// minitron, and tabulates what each chose.
func searchConfigs(ctx context.Context, env Env, commands []string) (string, error) {
	var b strings.Builder
	b.WriteString("| Parent | Deployment | Strategy | Chosen shape | Precision, settings | Params | Memory | E2E | Proxy |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for i, line := range commands {
		args, err := searchArgs(line, env, i)
		if err != nil {
			return "", err
		}
		parent, deployment := describe(args)
		for _, strategy := range []string{search.AutoCompress, search.Minitron} {
			a := args
			if strategy == search.Minitron {
				a = append(args[:len(args):len(args)], "--strategy", search.Minitron, "--force")
			}
			var stdout, stderr bytes.Buffer
			code := cli.Run(ctx, append(a, "--json"), strings.NewReader(""), &stdout, &stderr)
			cells := []string{parent, deployment, strategy}
			if code != 0 {
				cells = append(cells, whyNone(stderr.String()), "", "", "", "", "")
			} else {
				var s summary
				if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
					return "", fmt.Errorf("%s: reading its --json: %w", line, err)
				}
				c := s.Chosen
				shape := s.Shape
				if s.ParentMeets {
					shape = "the parent (it meets the budgets)"
				}
				cells = append(cells, shape, settings(args, c.Settings.Precision, c.Settings.KVDType, c.Settings.MemFraction, c.Settings.MaxNumSeqs),
					search.FormatCount(c.Costs.Params), search.FormatBytes(c.Costs.MemoryBytes), search.FormatSeconds(c.Costs.E2E), fmt.Sprintf("%.3f", c.Quality))
			}
			for k, c := range cells {
				cells[k] = strings.ReplaceAll(c, "|", `\|`)
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
	}
	return b.String(), nil
}

// searchArgs turns a printed command into the CLI's arguments: $C is the
// configs folder and --out a fresh folder under the scratch one.
func searchArgs(line string, env Env, i int) ([]string, error) {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "autocompress" || f[1] != "search" {
		return nil, fmt.Errorf("%q: not an autocompress search command", line)
	}
	args := f[1:]
	out := false
	for k, a := range args {
		args[k] = strings.ReplaceAll(a, "$C", env.Configs)
		if a == "--out" && k+1 < len(args) {
			args[k+1] = filepath.Join(env.Scratch, fmt.Sprint(i))
			out = true
		}
		if a == "--json" || a == "--strategy" {
			return nil, fmt.Errorf("%q: the table runs it with --json and both strategies: leave %s out", line, a)
		}
	}
	if !out {
		return nil, fmt.Errorf("%q: no --out", line)
	}
	return args, nil
}

// flagValue returns the value of --name in args ("" when absent).
func flagValue(args []string, name string) string {
	for k, a := range args {
		if a == "--"+name && k+1 < len(args) {
			return args[k+1]
		}
	}
	return ""
}

// describe names the parent (the config's name) and the deployment (GPU,
// workload, context, engine) of a command.
func describe(args []string) (parent, deployment string) {
	parent = strings.TrimSuffix(filepath.Base(flagValue(args, "model")), ".json")
	if _, name, ok := strings.Cut(parent, "--"); ok {
		parent = name
	}
	d := []string{flagValue(args, "gpu")}
	if w := flagValue(args, "workload"); w != "" {
		d = append(d, w)
	}
	if c := flagValue(args, "context"); c != "" {
		d = append(d, "context "+c)
	}
	d = append(d, flagValue(args, "engine"))
	return parent, strings.Join(d, ", ")
}

// slotEngine tells whether the engine named serves from a fixed number of
// sequence slots (llama.cpp's -np), from its entry in the engine table.
func slotEngine(name string) bool {
	e, err := estimate.LookupEngine(name)
	if err != nil {
		return false
	}
	sp, ok := e.Spec()
	return ok && sp.Sched == estimate.SlotScheduler
}

// settings is the chosen precision and engine settings.
func settings(args []string, precision, kv string, memFraction float64, seqs int) string {
	s := []string{precision}
	if kv != "" {
		s = append(s, "KV "+kv)
	}
	if seqs > 0 {
		if slotEngine(flagValue(args, "engine")) {
			s = append(s, fmt.Sprintf("%d slots", seqs))
		} else {
			s = append(s, fmt.Sprintf("max-num-seqs %d", seqs))
		}
	}
	if memFraction > 0 {
		s = append(s, fmt.Sprintf("mem %.3g", memFraction))
	}
	return strings.Join(s, ", ")
}

var outOfReach = regexp.MustCompile(`no candidate meets the budgets: (--\S+ .*?) is out of reach; the (smallest|largest) value the space reaches is ([^;]+)`)

// whyNone is the table's cell for a command that chose nothing: its error,
// without the command's name and the hints.
func whyNone(stderr string) string {
	// The error is the line the command prefixes with its name; progress
	// lines come before it.
	msg := strings.TrimSpace(stderr)
	for _, line := range strings.Split(msg, "\n") {
		if m, ok := strings.CutPrefix(line, "autocompress search: "); ok {
			msg = m
			break
		}
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if m := outOfReach.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("infeasible: %s out of reach (the %s the space reaches: %s)", m[1], m[2], m[3])
	}
	if i := strings.Index(msg, "; to make it feasible"); i >= 0 {
		msg = msg[:i]
	}
	if strings.HasPrefix(msg, "no candidate") {
		return "infeasible: " + msg
	}
	return "refused: " + msg
}
