package blas

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A team runs the items of one parallel loop on the calling goroutine and
// on persistent helper goroutines, so that the many small products of a
// decoding step can use every core: starting and joining fresh goroutines
// costs more than a decode product takes, but handing an item to a helper
// that is spinning for work costs about as much as an atomic operation.
//
// A helper that finishes an item spins (yielding its thread to any other
// runnable goroutine on every turn) for at most teamSpin for the next job,
// then parks on a channel: an idle engine burns no core. The caller never
// waits for a helper to wake up: it takes items itself from the same
// counter, and a parked helper that wakes late finds the items taken. It
// waits only for items a helper has already claimed.
//
// One loop runs on the team at a time; a loop started while the team is
// busy (another goroutine's product, or a product nested inside a team
// item) runs on fresh goroutines as before. Helpers are started on first
// use, up to GOMAXPROCS-1 of them, and live for the process (at most one
// per core the process was ever allowed, all parked when idle).
//
// A helper whose thread the OS takes away in the middle of an item (other
// processes want the cores) holds the caller up until it gets its thread
// back, often milliseconds. So when the caller waits for its helpers longer
// than teamStall, or more than four times as long as its own share of the
// items took (plus teamSlack), or when the helpers take no part in three
// loops in a row, the team refuses work for teamBackoff, and the products
// that only the team made parallel run on one core again: on a machine
// whose second core is busy elsewhere, decoding falls back to what it was.
type team struct {
	mu      sync.Mutex // held while a loop runs on the team
	helpers []*helper
	backoff atomic.Int64 // time.Now().UnixNano() before which run refuses
	misses  int          // loops in a row that no helper took part in (under mu)
	runs    atomic.Int64 // loops run on the team so far
	stalls  atomic.Int64 // waits over teamStall so far
}

const (
	teamStall   = 500 * time.Microsecond
	teamSlack   = 20 * time.Microsecond
	teamBackoff = 100 * time.Millisecond
)

// teamSpin is how long a helper looks for the next job before it parks.
// The gaps between the products of a decoding step (norms, rotary
// embedding, attention of a few rows) are a few microseconds to tens of
// microseconds; serving steps follow one another without a pause.
const teamSpin = 100 * time.Microsecond

// teamJob is one parallel loop: items 0..n-1 of fn, taken one at a time.
type teamJob struct {
	fn      func(lo, hi int)
	n       int64
	next    atomic.Int64 // next item to take
	pending atomic.Int64 // items not finished
}

type helper struct {
	job    atomic.Pointer[teamJob]
	asleep atomic.Bool
	wake   chan struct{} // capacity 1
}

var crew team

// teamOn routes parallel loops to the team. It is off by default: on the
// shared 2-core development machine, loaded by other processes the whole
// time it was measured (load 3 to 7), the team backed off most of the time
// and decoding measured 0.95-0.99x the serial path (BenchmarkDecodeStepAB);
// a first run at lower load gave 1.4-2.3x at one sequence. Turn it on
// (SetTeam) after BenchmarkDecodeStepAB shows a gain on a quiet machine.
var teamOn atomic.Bool

// run runs fn over the items 0..n-1 on the caller and threads-1 helpers,
// and reports false, without running anything, when the team is busy or
// backing off.
func (t *team) run(threads, n int, fn func(lo, hi int)) bool {
	if !teamOn.Load() || time.Now().UnixNano() < t.backoff.Load() || !t.mu.TryLock() {
		return false
	}
	defer t.mu.Unlock()
	t.runs.Add(1)
	for len(t.helpers) < threads-1 {
		h := &helper{wake: make(chan struct{}, 1)}
		t.helpers = append(t.helpers, h)
		go h.loop()
	}
	j := &teamJob{fn: fn, n: int64(n)}
	j.pending.Store(int64(n))
	for _, h := range t.helpers[:threads-1] {
		h.job.Store(j)
		if h.asleep.Load() {
			select {
			case h.wake <- struct{}{}:
			default:
			}
		}
	}
	start := time.Now()
	if j.work() == j.n && j.n >= 4 {
		// The helpers took none of four or more items: they are not
		// getting a core (or were parked). Three such loops in a row
		// count as a stall.
		if t.misses++; t.misses >= 3 {
			t.misses = 0
			t.stalls.Add(1)
			t.backoff.Store(time.Now().Add(teamBackoff).UnixNano())
		}
		return true
	}
	t.misses = 0
	if j.pending.Load() > 0 {
		t0 := time.Now()
		for j.pending.Load() > 0 {
			runtime.Gosched()
		}
		now := time.Now()
		if wait := now.Sub(t0); wait > teamStall || wait > 4*t0.Sub(start)+teamSlack {
			t.stalls.Add(1)
			t.backoff.Store(now.Add(teamBackoff).UnixNano())
		}
	}
	return true
}

// work takes and runs items until none are left, and returns how many it ran.
func (j *teamJob) work() (done int64) {
	for {
		i := j.next.Add(1) - 1
		if i >= j.n {
			return done
		}
		j.fn(int(i), int(i)+1)
		j.pending.Add(-1)
		done++
	}
}

func (h *helper) loop() {
	for {
		j := h.job.Swap(nil)
		if j == nil {
			deadline := time.Now().Add(teamSpin)
			for spins := 0; j == nil; spins++ {
				runtime.Gosched()
				j = h.job.Swap(nil)
				if j == nil && spins%64 == 63 && time.Now().After(deadline) {
					break
				}
			}
		}
		if j == nil {
			// Park. Setting asleep before looking once more pairs with
			// run storing the job before reading asleep: either run sees
			// asleep and sends a wake-up, or this look finds the job. A
			// wake-up left over from a job found here only makes the next
			// park return early.
			h.asleep.Store(true)
			if j = h.job.Swap(nil); j == nil {
				<-h.wake
			}
			h.asleep.Store(false)
			if j == nil {
				continue
			}
		}
		j.work()
	}
}

// parked reports how many helpers are parked (tests check that an idle
// team burns no core).
func (t *team) parked() (parked, all int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, h := range t.helpers {
		if h.asleep.Load() {
			parked++
		}
	}
	return parked, len(t.helpers)
}

// SetTeam turns the team of persistent helper goroutines on or off (the
// default, see teamOn), and returns the previous setting, so that one
// binary can measure both. Off is the behaviour before it: fresh goroutines for every
// parallel loop, products of up to four rows serial below 2²³
// multiply-adds, and the single row block of a product of up to 96 rows on
// one core. Results are bit-identical either way.
func SetTeam(on bool) bool { return teamOn.Swap(on) }

// TeamStats returns how many parallel loops have run on the team and how
// many of them waited too long for a helper (each such stall makes the
// team refuse work for the next 100 ms), for tests and benchmarks.
func TeamStats() (runs, stalls int64) { return crew.runs.Load(), crew.stalls.Load() }
