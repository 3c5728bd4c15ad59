package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/autocompress/autocompress/checkpoint"
	"github.com/autocompress/autocompress/internal/human"
	"github.com/autocompress/autocompress/internal/progress"
	"github.com/autocompress/autocompress/servebench"
)

// ManifestName is the file, inside each stage's directory, that records what
// the stage was run from and what it produced. It is written last, so a
// directory without it is never taken for a finished stage.
const ManifestName = "manifest.json"

// manifestVersion changes when the manifest's meaning changes; an older
// manifest makes its stage run again.
const manifestVersion = 1

// Stage is one step of a run: it reads its parameters, the outside files it
// names and the outputs of the stages it depends on, and writes its own
// outputs into a fresh directory.
type Stage struct {
	// Name identifies the stage in the run directory, the manifest and the
	// progress display ("search", "prune", ...).
	Name string
	// Deps names earlier stages whose outputs this stage reads. A dependency's
	// output hash is part of this stage's key, so a changed upstream output
	// reruns this stage, and an unchanged one (even after a rerun) does not.
	Deps []string
	// Params is everything else the stage's result depends on (its settings),
	// as a JSON-encodable value. Two runs with equal Params, Files and
	// dependency outputs reuse the stage.
	Params any
	// Files are outside files or directories the stage reads (calibration
	// text, the parent checkpoint); they are hashed by content.
	Files []string
	// Run does the work. It writes only under env.Dir and must return soon
	// after ctx is cancelled.
	Run func(ctx context.Context, env *Env) error
	// Check, when not nil, is a quick test (a fraction of a second, no
	// outputs) that the stage can succeed with its settings, such as a
	// budget no child can meet. Run calls the Check of every stage it is
	// about to run before the first of them runs, so that a run that must
	// fail fails before the work, not after hours of it.
	Check func(ctx context.Context) error
}

// Env is what a running stage sees.
type Env struct {
	// Dir is the stage's (temporary) output directory; it is renamed into
	// place when Run returns nil.
	Dir string
	// Inputs maps each dependency's name to its finished output directory.
	Inputs map[string]string
	// Index and Count say which stage this is (1-based) of how many.
	Index, Count int
	report       progress.Func
	name         string
	runDir       string
	// jobCPU and jobRSS are the CPU time and the largest peak resident set
	// of the job processes the stage launched (AddJobUsage).
	jobCPU float64
	jobRSS int64
}

// AddJobUsage counts a launched job's processes in the stage's CPU time
// and peak resident set (the largest of this process's and theirs).
func (e *Env) AddJobUsage(cpuSeconds float64, peakRSS int64) {
	e.jobCPU += cpuSeconds
	e.jobRSS = max(e.jobRSS, peakRSS)
}

// StateDir returns a directory that survives an interrupted run of the
// stage (a resumable checkpoint, a log appended across attempts), created
// on first use. It lives in the run directory beside the stage, outside
// its output, and the stage removes it when it no longer needs it.
func (e *Env) StateDir() string {
	d := filepath.Join(e.runDir, stateDirName, e.name)
	os.MkdirAll(d, 0o755) //output:not-an-output: resumable state of a stage, removed when it finishes
	return d
}

// Input returns the output directory of dependency name.
func (e *Env) Input(name string) string { return e.Inputs[name] }

// Progress returns the Func through which the stage reports its work: its
// events are stamped with the stage's name and place in the run (a
// library's own stage name becomes the phase), and keep their counts,
// resumed units and elapsed time, from which the display derives the rate
// and the ETA.
func (e *Env) Progress() progress.Func {
	if e.report == nil {
		return nil
	}
	return func(ev progress.Event) {
		if ev.Phase == "" && ev.Stage != e.name {
			ev.Phase = ev.Stage
		}
		ev.Stage, ev.Index, ev.Count = e.name, e.Index, e.Count
		e.report(ev)
	}
}

// Note reports a message worth keeping.
func (e *Env) Note(format string, a ...any) { e.Progress().Notef(e.name, format, a...) }

// Options configure Run.
type Options struct {
	// Progress receives every event: each stage's start (progress.Started,
	// or progress.Reused), its work, its notes and its end
	// (progress.Finished, progress.Failed, or progress.Interrupted when the
	// context was cancelled); nil discards them.
	Progress progress.Func
	// Force reruns every stage even when its manifest matches.
	Force bool
	// Only, when not empty, stops the run after the named stage.
	Until string
}

// UntilError is an Options.Until that names no stage of the run.
type UntilError struct {
	Until  string
	Stages []string
}

func (e *UntilError) Error() string {
	return fmt.Sprintf("%q is not a stage of this run (%s)", e.Until, strings.Join(e.Stages, ", "))
}

// checkUntil returns an *UntilError when until is set and names no stage.
func checkUntil(stages []Stage, until string) error {
	if until == "" {
		return nil
	}
	names := make([]string, len(stages))
	for i, s := range stages {
		if s.Name == until {
			return nil
		}
		names[i] = s.Name
	}
	return &UntilError{Until: until, Stages: names}
}

// Manifest records one finished stage.
type Manifest struct {
	Version int    `json:"version"`
	Stage   string `json:"stage"`
	// Key is the hash of everything below that the stage was run from.
	Key    string          `json:"key"`
	Params json.RawMessage `json:"params"`
	// Files and Deps map each outside file and each dependency to the hash
	// of its content (for a dependency: its OutputHash).
	Files map[string]string `json:"files,omitempty"`
	Deps  map[string]string `json:"deps,omitempty"`
	// Outputs maps each file the stage wrote (slash-separated, relative to
	// its directory) to its sha256; OutputHash is the hash over them.
	Outputs    map[string]string `json:"outputs"`
	OutputHash string            `json:"output_hash"`
	Started    time.Time         `json:"started"`
	Seconds    float64           `json:"seconds"`
	// PeakRSSBytes is the run process's peak resident set during the stage
	// (VmHWM, reset when the stage starts; Linux, else 0), or a PyTorch
	// job's largest process's where larger (Env.AddJobUsage). The
	// bench-serve processes of a measuring stage report their own.
	PeakRSSBytes int64 `json:"peak_rss_bytes,omitempty"`
	// CPUSeconds is the CPU time (user and system) the run process spent
	// on the stage, with that of the PyTorch job processes it launched:
	// its cost apart from waiting for a shared machine's cores (the
	// bench-serve processes of a measuring stage not counted).
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
}

// StageResult says what happened to one stage.
type StageResult struct {
	Name    string  `json:"name"`
	Dir     string  `json:"dir"`
	Reused  bool    `json:"reused"`
	Why     string  `json:"why,omitempty"` // why it ran (when not reused)
	Seconds float64 `json:"seconds"`       // of this run (0 when reused)
	// RunSeconds is the time the stage took when it was computed, and
	// PeakRSSBytes and CPUSeconds the process's peak resident set and CPU
	// time then (Manifest).
	RunSeconds   float64 `json:"run_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes,omitempty"`
	CPUSeconds   float64 `json:"cpu_seconds,omitempty"`
	OutputHash   string  `json:"output_hash"`
}

// Result is the outcome of Run.
type Result struct {
	Dir    string        `json:"dir"`
	Stages []StageResult `json:"stages"`
}

// Reused returns the names of the stages that were reused.
func (r *Result) Reused() []string {
	var out []string
	for _, s := range r.Stages {
		if s.Reused {
			out = append(out, s.Name)
		}
	}
	return out
}

// StageError is a stage that failed; it wraps the stage's error.
type StageError struct {
	Stage string
	Err   error
}

func (e *StageError) Error() string { return "stage " + e.Stage + ": " + e.Err.Error() }
func (e *StageError) Unwrap() error { return e.Err }

// StageDir returns the directory of stage number i (0-based) named name under
// the run directory.
func StageDir(runDir string, i int, name string) string {
	return filepath.Join(runDir, fmt.Sprintf("%02d-%s", i+1, name))
}

// Run runs the stages in order under dir, reusing every stage whose manifest
// matches its parameters, files and dependencies and whose outputs are intact.
// Each stage writes into a temporary directory that is renamed into place only
// when it succeeds, so an interrupted or failed run leaves the finished stages
// and nothing half-written; the next Run resumes after the last finished
// stage. Only one Run may use a directory at a time.
//
// dir must not exist, be empty, or be a run directory (one an earlier Run
// wrote: see IsRunDir); anything else is a *ForeignDirError before any
// work, whatever opt.Force says. A run that finishes no stage leaves dir as
// it found it (absent or empty). Before the first stage that runs, the
// Check of it and of every later stage is called.
func Run(ctx context.Context, dir string, stages []Stage, opt Options) (res *Result, err error) {
	if err := checkStages(stages); err != nil {
		return nil, err
	}
	if err := checkUntil(stages, opt.Until); err != nil {
		return nil, err
	}
	existed, err := checkRunDir(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pipeline: creating run directory: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		if !existed {
			os.Remove(dir)
		}
		return nil, err
	}
	defer unlock()
	defer func() {
		if err != nil {
			tidyUnused(dir, existed)
		}
	}()
	cleanTemp(dir)
	checked := false

	res = &Result{Dir: dir}
	out := map[string]string{}     // stage name -> finished directory
	outHash := map[string]string{} // stage name -> output hash
	emit := opt.Progress
	for i, st := range stages {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		sdir := StageDir(dir, i, st.Name)
		key, man, err := stageKey(st, outHash)
		if err != nil {
			return res, &StageError{Stage: st.Name, Err: err}
		}
		base := progress.Event{Stage: st.Name, Index: i + 1, Count: len(stages)}
		why := "no earlier result"
		if !opt.Force {
			old, reason := reusable(sdir, key)
			if old != nil {
				out[st.Name], outHash[st.Name] = sdir, old.OutputHash
				res.Stages = append(res.Stages, StageResult{Name: st.Name, Dir: sdir, Reused: true,
					RunSeconds: old.Seconds, PeakRSSBytes: old.PeakRSSBytes, CPUSeconds: old.CPUSeconds, OutputHash: old.OutputHash})
				p := base
				p.State, p.Msg = progress.Reused, "unchanged inputs; reusing "+sdir
				emit.Report(p)
				if opt.Until == st.Name {
					break
				}
				continue
			}
			why = reason
		} else {
			why = "forced"
		}
		if !checked {
			if err := checkAhead(ctx, stages[i:], opt.Until); err != nil {
				return res, err
			}
			checked = true
		}
		p := base
		p.State, p.Msg = progress.Started, why
		emit.Report(p)
		start := time.Now()
		sr, err := runStage(ctx, st, sdir, man, out, i, len(stages), emit)
		if err != nil {
			p := base
			p.State, p.Msg, p.Elapsed = progress.Failed, err.Error(), time.Since(start)
			if ctx.Err() != nil {
				p.State, p.Msg = progress.Interrupted, ""
			}
			emit.Report(p)
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, &StageError{Stage: st.Name, Err: err}
		}
		sr.Why = why
		out[st.Name], outHash[st.Name] = sdir, sr.OutputHash
		res.Stages = append(res.Stages, *sr)
		p = base
		p.State, p.Elapsed = progress.Finished, time.Since(start)
		if sr.PeakRSSBytes > 0 {
			p.Msg = fmt.Sprintf("%.0f CPU-s, peak RSS %s", sr.CPUSeconds, human.Bytes(sr.PeakRSSBytes))
		}
		emit.Report(p)
		if opt.Until == st.Name {
			break
		}
	}
	return res, nil
}

// checkAhead calls the Check of every stage in stages up to the one named
// until (all when until is empty).
func checkAhead(ctx context.Context, stages []Stage, until string) error {
	for _, st := range stages {
		if st.Check != nil {
			if err := st.Check(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return &StageError{Stage: st.Name, Err: err}
			}
		}
		if st.Name == until {
			break
		}
	}
	return nil
}

func checkStages(stages []Stage) error {
	seen := map[string]bool{}
	for _, st := range stages {
		switch {
		case st.Name == "" || strings.ContainsAny(st.Name, `/\ `):
			return fmt.Errorf("pipeline: bad stage name %q", st.Name)
		case seen[st.Name]:
			return fmt.Errorf("pipeline: stage %q twice", st.Name)
		case st.Run == nil:
			return fmt.Errorf("pipeline: stage %q has no Run", st.Name)
		}
		for _, d := range st.Deps {
			if !seen[d] {
				return fmt.Errorf("pipeline: stage %q depends on %q, which does not come before it", st.Name, d)
			}
		}
		seen[st.Name] = true
	}
	return nil
}

// stageKey hashes what the stage runs from and returns the manifest to write.
func stageKey(st Stage, outHash map[string]string) (string, *Manifest, error) {
	params, err := json.Marshal(st.Params)
	if err != nil {
		return "", nil, fmt.Errorf("encoding parameters: %w", err)
	}
	m := &Manifest{Version: manifestVersion, Stage: st.Name, Params: params,
		Files: map[string]string{}, Deps: map[string]string{}}
	for _, f := range st.Files {
		h, err := HashPath(f)
		if err != nil {
			return "", nil, err
		}
		m.Files[f] = h
	}
	for _, d := range st.Deps {
		m.Deps[d] = outHash[d]
	}
	h := sha256.New()
	fmt.Fprintf(h, "v%d\x00%s\x00%s\x00", m.Version, st.Name, params)
	for _, k := range sortedKeys(m.Files) {
		fmt.Fprintf(h, "f\x00%s\x00%s\x00", k, m.Files[k])
	}
	for _, k := range sortedKeys(m.Deps) {
		fmt.Fprintf(h, "d\x00%s\x00%s\x00", k, m.Deps[k])
	}
	m.Key = hex.EncodeToString(h.Sum(nil))
	return m.Key, m, nil
}

// reusable returns the manifest of a finished stage in sdir whose key is key
// and whose outputs are intact, or nil and the reason it must run.
func reusable(sdir, key string) (*Manifest, string) {
	b, err := os.ReadFile(filepath.Join(sdir, ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(sdir); err == nil {
			return nil, "its directory has no manifest (not written by a finished stage)"
		}
		return nil, "no earlier result"
	}
	if err != nil {
		return nil, "its manifest cannot be read: " + err.Error()
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, "its manifest is not valid JSON: " + err.Error()
	}
	if m.Version != manifestVersion {
		return nil, fmt.Sprintf("its manifest is version %d, not %d", m.Version, manifestVersion)
	}
	if m.Key != key {
		return nil, "its inputs changed"
	}
	got, _, err := hashOutputs(sdir)
	if err != nil {
		return nil, "its outputs cannot be read: " + err.Error()
	}
	for name, h := range m.Outputs {
		switch g, ok := got[name]; {
		case !ok:
			return nil, "its output " + name + " is missing"
		case g != h:
			return nil, "its output " + name + " was changed after it was written"
		}
	}
	for name := range got {
		if _, ok := m.Outputs[name]; !ok {
			return nil, "its directory holds " + name + ", which it did not write"
		}
	}
	return &m, ""
}

func runStage(ctx context.Context, st Stage, sdir string, man *Manifest, out map[string]string, i, n int, emit progress.Func) (*StageResult, error) {
	od, err := checkpoint.NewOutputDir(sdir, true)
	if err != nil {
		return nil, err
	}
	defer od.Abort()
	od.Watch(ctx)
	env := &Env{Dir: od.Path(), Inputs: map[string]string{}, Index: i + 1, Count: n,
		report: emit, name: st.Name, runDir: filepath.Dir(sdir)}
	for _, d := range st.Deps {
		env.Inputs[d] = out[d]
	}
	start := time.Now()
	man.Started = start.UTC()
	// The stage's peak starts from what is live: the garbage of the stage
	// before (gigabytes after a real-size parent's search) is given back
	// to the operating system first.
	debug.FreeOSMemory()
	rss, cpu := servebench.ResetPeakRSS(), servebench.ProcessCPUSeconds()
	if err := st.Run(ctx, env); err != nil {
		return nil, err
	}
	if rss {
		man.PeakRSSBytes = max(servebench.PeakRSS(), env.jobRSS)
	}
	man.CPUSeconds = servebench.ProcessCPUSeconds() - cpu + env.jobCPU
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	outs, all, err := hashOutputs(od.Path())
	if err != nil {
		return nil, fmt.Errorf("hashing outputs: %w", err)
	}
	man.Outputs, man.OutputHash = outs, all
	man.Seconds = time.Since(start).Seconds()
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFileSync(filepath.Join(od.Path(), ManifestName), append(b, '\n')); err != nil {
		return nil, err
	}
	if err := od.Commit(); err != nil {
		return nil, err
	}
	return &StageResult{Name: st.Name, Dir: sdir, Seconds: man.Seconds, RunSeconds: man.Seconds,
		PeakRSSBytes: man.PeakRSSBytes, CPUSeconds: man.CPUSeconds, OutputHash: all}, nil
}

// hashOutputs hashes every regular file under dir except the manifest, and
// the whole set.
func hashOutputs(dir string) (map[string]string, string, error) {
	outs := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == ManifestName {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		h, err := hashFile(p)
		if err != nil {
			return err
		}
		outs[rel] = h
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	h := sha256.New()
	for _, k := range sortedKeys(outs) {
		fmt.Fprintf(h, "%s\x00%s\x00", k, outs[k])
	}
	return outs, hex.EncodeToString(h.Sum(nil)), nil
}

// HashPath returns the sha256 of a file's content, or for a directory a hash
// over its files' relative names and contents.
func HashPath(p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("pipeline: %w", err)
	}
	if !st.IsDir() {
		return hashFile(p)
	}
	_, all, err := hashOutputs(p)
	if err != nil {
		return "", fmt.Errorf("pipeline: hashing %s: %w", p, err)
	}
	return all, nil
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("pipeline: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("pipeline: hashing %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644) //output:inside
	if err != nil {
		return fmt.Errorf("pipeline: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("pipeline: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("pipeline: writing %s: %w", path, err)
	}
	return f.Close()
}

// cleanTemp removes temporary stage directories that a killed run left.
func cleanTemp(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), ".tmp-") {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
