package lagprobe

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"replab/internal/clock"
)

// Querier reads a replica's lag stamps (engine.LagReader is one). Connect it from the replica's own
// site so the poll does not cross a WAN link. Positions is called by one
// goroutine at a time.
type Querier interface {
	// Positions sets dst[w] to the seq of writer w visible at the replica.
	// dst holds the previous positions on entry; rows it does not find
	// may be left alone.
	Positions(ctx context.Context, dst []int64) error
}

// TimedQuerier is a Querier that says itself when its positions were
// read, on the probe's clock (clock.Now for a probe that has no Config.Now):
// a reader far from the watcher — polling across a WAN, or an agent on the
// replica's host with a clock of its own — knows better than the watcher's
// own readings around the call. start is when the read began (the
// positions are not older), end when the positions were known to be
// visible; end ≥ start. The watcher uses these times instead of its own.
type TimedQuerier interface {
	TimedPositions(ctx context.Context, dst []int64) (start, end int64, err error)
}

// watcherNice is the watcher thread's nice value while it watches: on a
// machine the workload saturates, a poll due every millisecond otherwise
// waits behind the servers and the driver for its turn on a CPU, and the
// achieved interval drifts above the configured one. The thread sleeps
// most of the time, so this costs the others little.
const watcherNice = -10

// maxBackoff bounds the wait between polls while a replica's polls fail.
const maxBackoff = 100 * time.Millisecond

// replica is one watched replica.
type replica struct {
	name string
	p    *Probe
	skip []bool // per writer: not watched here (it writes at this node)

	// Published for the writers (low) and WaitCaughtUp (seen, done, err).
	low   []atomic.Int64 // per writer: seqs ≤ low are never read again
	seen  []atomic.Int64 // per writer: visible seq
	done  chan struct{}
	err   error       // why Watch returned; read after done is closed
	ready atomic.Bool // the first poll succeeded
	// idle is set while the watcher waits for a transaction to look for;
	// Writer.Sending then wakes it through wake.
	idle atomic.Bool
	wake chan struct{}

	mu      sync.Mutex
	vis     []int64 // per writer: visible seq, as of the last poll
	polled  bool
	pending []pendingTx

	advancedAt int64 // the end of the last poll that saw a measured transaction
	lastSent   int64 // the latest COMMIT-sent time among the measured transactions seen
	lagStats

	before, failedVisible, stale, regressions, forgotten int64

	// Adaptive polling (see Watch). Owned by the watcher's goroutine,
	// read by result under mu.
	bounds  [floorWindow]int64 // the latest lag lower bounds, a ring
	nBounds int                // how many were recorded
	floor   int64              // ns after COMMIT sent before which no poll is made
	hits    int64              // transactions seen by the first poll of their window
	waits   int64              // times the watcher had nothing to look for
}

// pendingTx became visible before its COMMIT returned (synchronous
// schemes): it is counted once Done says whether it committed.
type pendingTx struct {
	w       int
	seq, at int64
	first   bool
}

// Histogram ranges: 1 µs to one day.
const (
	histLowUs  = 1
	histHighUs = 24 * 3600 * 1_000_000
)

func (p *Probe) register(name string, skip func(writer int) bool) (*replica, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := *p.replicas.Load()
	if p.watched(name) {
		return nil, fmt.Errorf("lag probe: replica %s is already watched", name)
	}
	n := len(p.writers)
	r := &replica{
		name:     name,
		p:        p,
		low:      make([]atomic.Int64, n),
		seen:     make([]atomic.Int64, n),
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		vis:      make([]int64, n),
		lagStats: newLagStats(p.start),
	}
	r.skip = make([]bool, n)
	for w := range r.skip {
		r.skip[w] = skip != nil && skip(w)
	}
	rs := append(append([]*replica(nil), old...), r)
	p.replicas.Store(&rs)
	return r, nil
}

// Watch polls one replica every Interval until ctx ends, then returns nil.
// The first poll must succeed (it sets the baseline: transactions already
// visible then are counted as VisibleBeforeWatch); later failures are
// counted, retried with backoff up to 100 ms, and reported in the Result.
// Start every watcher before the writers' measured phase.
//
// Unless Config.PollAlways is set, polls are made only while some tracked
// transaction whose COMMIT was sent is not yet seen, and not before its
// COMMIT was sent plus a floor: the lowest lower bound of the latest 64
// lags seen at this replica, minus an interval and 1 ms (a change does not cross the
// network much faster than the fastest recent one did). A poll costs
// about as much CPU as a small transaction, and polling only then is what
// keeps the probe within a few per cent of throughput. Should a
// transaction be seen by the first poll of its window, the floor may have
// been too high: it is halved and the event counted (Result.WindowHits).
func (p *Probe) Watch(ctx context.Context, name string, q Querier) error {
	return p.WatchWith(ctx, name, q, WatchOptions{})
}

// WatchOptions tunes one replica's watch.
type WatchOptions struct {
	// Skip leaves out writers whose transactions are not replicated to
	// this node but written at it (a multi-master node's own users):
	// they get no lag here and do not count in its Result.
	Skip func(writer int) bool
}

// WatchWith is Watch with options.
func (p *Probe) WatchWith(ctx context.Context, name string, q Querier, o WatchOptions) (err error) {
	r, err := p.register(name, o.Skip)
	if err != nil {
		return err
	}
	defer func() {
		r.err = err
		close(r.done)
	}()
	sleep := p.sleep
	if sleep == nil {
		defer clock.LockThread(watcherNice)()
		s := clock.NewSleeper()
		if p.realTime {
			sleep = s.UntilCtx
		} else {
			sleep = func(ctx context.Context, deadline int64) bool {
				return s.UntilCtx(ctx, clock.Now()+deadline-p.now())
			}
		}
	}
	dst := make([]int64, len(p.writers))
	next := p.now()
	fails := 0
	chained := false // this poll follows the previous one by the interval
	for {
		copy(dst, r.vis) // r.vis changes only on this goroutine
		start, end, qerr := p.poll(ctx, q, dst)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case qerr != nil && !r.polled:
			return fmt.Errorf("lag probe: replica %s: first poll: %w", name, qerr)
		case qerr != nil:
			r.failed(qerr)
			fails++
			next = start + max(p.interval, min(p.interval<<min(fails, 20), int64(maxBackoff)))
		default:
			fails = 0
			r.observe(start, end, dst, chained)
			next += p.interval
		}
		if now := p.now(); next < now {
			next = now // the poll overran: poll again at once
		}
		chained = true
		if !p.always && qerr == nil {
			for {
				ws, ok := r.window()
				if ok {
					if ws > next {
						next, chained = ws, false
					}
					break
				}
				// Nothing to look for: wait for a COMMIT to be sent.
				r.idle.Store(true)
				if _, ok := r.window(); ok {
					r.idle.Store(false)
					continue
				}
				r.mu.Lock()
				r.waits++
				r.mu.Unlock()
				if p.idle != nil {
					p.idle()
				}
				select {
				case <-r.wake:
				case <-ctx.Done():
					r.idle.Store(false)
					return nil
				}
				r.idle.Store(false)
				chained = false
				if now := p.now(); next < now {
					next = now
				}
			}
		}
		if !sleep(ctx, next) {
			return nil
		}
	}
}

// poll reads q's positions into dst and says when: its own times for a
// TimedQuerier, the probe's clock around the call otherwise.
func (p *Probe) poll(ctx context.Context, q Querier, dst []int64) (start, end int64, err error) {
	if tq, ok := q.(TimedQuerier); ok {
		return tq.TimedPositions(ctx, dst)
	}
	start = p.now()
	err = q.Positions(ctx, dst)
	return start, p.now(), err
}

// window is when the next poll is worth making: the earliest COMMIT-sent
// time of a transaction not yet seen here, plus the floor; false when
// there is none. Only the watcher's goroutine calls it.
func (r *replica) window() (int64, bool) {
	var first int64
	found := false
	for w, wr := range r.p.writers {
		if r.skip[w] {
			continue
		}
		for s, end := r.vis[w]+1, wr.issued.Load(); s <= end; s++ {
			e, ok := wr.load(s)
			if !ok {
				continue
			}
			if st := e & stMask; st == stEmpty || st == stFailed {
				continue // not sent yet (or never), or rolled back
			}
			if t := int64(e >> timeShift); !found || t < first {
				first, found = t, true
			}
			break // the writer's later transactions were sent later
		}
	}
	return first + r.floor, found
}

func (r *replica) failed(err error) {
	r.mu.Lock()
	r.lagStats.failed(err)
	r.mu.Unlock()
}

// observe takes one successful poll that started at start and returned at
// end. A writer whose visible seq moved from s0 to s1 made every committed
// transaction in (s0, s1] visible after the previous poll's snapshot and
// before this one's, so before end: end is taken as the moment of
// visibility. The lag is thus an upper bound, late by less than the
// interval plus the poll's duration, and never below the true lag (a poll
// start would be: the snapshot is taken after it, and a slow poll let a
// 50 ms link show 49.6 ms).
func (r *replica) observe(start, end int64, pos []int64, chained bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, floor := r.last, r.floor // as this poll was scheduled
	r.countPoll(start, end, chained)
	if f := r.p.onPoll; f != nil {
		f(r.name, start, end)
	}
	r.resolve()
	first := !r.polled
	r.polled = true
	defer r.ready.Store(true)
	for w, v := range pos {
		if r.skip[w] {
			continue
		}
		old := r.vis[w]
		if v <= old {
			if v < old {
				r.regressions++
			}
			continue
		}
		wr := r.p.writers[w]
		if v > wr.issued.Load() {
			r.stale++ // not ours: e.g. a previous run's row not yet reset here
			continue
		}
		for s := old + 1; s <= v; s++ {
			e, ok := wr.load(s)
			if !ok {
				r.forgotten++
				continue
			}
			if st := e & stMask; (st == stOK || st == stSent) && e&measuredBit != 0 {
				r.lastSent = max(r.lastSent, int64(e>>timeShift))
				r.advancedAt = end
			}
			if st := e & stMask; !first && !r.p.always && (st == stOK || st == stSent) {
				r.learn(int64(e>>timeShift), prev, start, end, floor, e&measuredBit != 0)
			}
			switch e & stMask {
			case stOK:
				r.record(w, s, e, end, first)
			case stSent:
				r.pending = append(r.pending, pendingTx{w: w, seq: s, at: end, first: first})
			case stFailed:
				if s == v {
					r.failedVisible++ // reported failed, yet committed
				}
			}
		}
		r.vis[w] = v
		r.seen[w].Store(v)
	}
	for w, v := range r.vis {
		low := v
		for _, pt := range r.pending {
			if pt.w == w {
				low = min(low, pt.seq-1)
			}
		}
		r.low[w].Store(low)
	}
}

// The floor is the lowest of the latest floorWindow lag lower bounds
// minus one interval and floorMargin, once floorMin of them were seen (the
// first transactions of a run are often slower). A lower bound is up to
// an interval below the lag it bounds: without the interval in the
// margin, transactions as fast as the fastest recent one would hit.
const (
	floorWindow = 64
	floorMin    = 8
	floorMargin = time.Millisecond
)

// learn adjusts the floor from a transaction sent at sent and first seen
// by the poll from start to end, after the one that started at prev;
// floor is the floor the poll was scheduled with. If prev lies in the
// transaction's window, prev - sent is a lower bound of its lag (it was
// not visible when that poll looked). If not, this poll was its window's
// first, and the transaction may have been visible before the window
// opened. That is a hit when the poll started on time (within an interval
// of the window opening) and the lag it shows, end - sent, is below the
// lowest recent lower bound (floor + interval + margin): the transaction
// was faster than any recent one, so the floor may be too high. Half the
// floor is then recorded as a bound, which halves the floor until
// floorWindow later bounds have pushed it out. Otherwise (a late or slow
// poll on a busy machine) it says nothing about the floor.
func (r *replica) learn(sent, prev, start, end, floor int64, measured bool) {
	ws := sent + floor
	var bound int64
	switch {
	case floor > 0 && prev < ws && start <= ws+r.p.interval && end-sent < floor+r.p.interval+int64(floorMargin):
		if measured {
			r.hits++ // warmup hits are common while lags settle
		}
		bound = floor/2 + int64(floorMargin)
	case floor > 0 && prev < ws:
		return
	default:
		bound = max(prev-sent, 0)
	}
	r.bounds[r.nBounds%floorWindow] = bound
	r.nBounds++
	if r.nBounds < floorMin {
		return
	}
	low := bound
	for _, b := range r.bounds[:min(r.nBounds, floorWindow)] {
		low = min(low, b)
	}
	r.floor = max(low-r.p.interval-int64(floorMargin), 0)
}

// resolve counts pending transactions whose COMMIT has returned.
func (r *replica) resolve() {
	keep := r.pending[:0]
	for _, pt := range r.pending {
		e, _ := r.p.writers[pt.w].load(pt.seq)
		switch e & stMask {
		case stSent:
			keep = append(keep, pt)
		case stOK:
			r.record(pt.w, pt.seq, e, pt.at, pt.first)
		case stFailed:
			r.failedVisible++
		}
	}
	r.pending = keep
}

// record counts one committed transaction that became visible at at.
func (r *replica) record(w int, seq int64, e uint64, at int64, first bool) {
	if e&measuredBit == 0 {
		return
	}
	if first {
		r.before++
		return
	}
	lag := max(at-int64(e>>timeShift), 0) // at > sent unless the clock is not monotonic
	r.add(lag)
	if f := r.p.onLag; f != nil {
		f(r.name, w, seq, lag)
	}
}

// WaitWatching waits until each named replica's watcher has made its first
// poll (its baseline), so that transactions from then on are timed. Call
// it after starting the Watch goroutines and before the measure phase.
func (p *Probe) WaitWatching(ctx context.Context, replicas ...string) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		waiting := ""
		for _, name := range replicas {
			var ready *atomic.Bool
			var done <-chan struct{}
			var werr *error
			for _, x := range *p.replicas.Load() {
				if x.name == name {
					ready, done, werr = &x.ready, x.done, &x.err
				}
			}
			for _, x := range *p.preplicas.Load() {
				if x.name == name {
					ready, done, werr = &x.ready, x.done, &x.err
				}
			}
			switch {
			case ready == nil:
				waiting = name + " (not watched yet)"
			case ready.Load():
				continue
			default:
				select {
				case <-done:
					if *werr != nil {
						return *werr
					}
					return fmt.Errorf("lag probe: replica %s: watch ended before its first poll", name)
				default:
				}
				waiting = name
			}
		}
		if waiting == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lag probe: waiting for the first poll of %s: %w", waiting, ctx.Err())
		case <-t.C:
		}
	}
}

// WaitCaughtUp waits until every measured transaction that committed is
// visible at every watched replica. It fails when ctx ends first, saying
// who is behind, or when a watcher has stopped.
func (p *Probe) WaitCaughtUp(ctx context.Context) error {
	t := time.NewTicker(time.Duration(max(p.interval, int64(time.Millisecond))))
	defer t.Stop()
	for {
		behind := ""
		for _, r := range *p.replicas.Load() {
			for w, wr := range p.writers {
				if r.skip[w] {
					continue
				}
				want, seen := wr.lastOK.Load(), r.seen[w].Load()
				if seen >= want {
					continue
				}
				select {
				case <-r.done:
					why := "its context ended"
					if r.err != nil {
						why = r.err.Error()
					}
					return fmt.Errorf("lag probe: replica %s stopped being watched (%s) with writer %d at seq %d of %d", r.name, why, w, seen, want)
				default:
				}
				if behind == "" {
					behind = fmt.Sprintf("replica %s shows writer %d at seq %d, want %d", r.name, w, seen, want)
				}
			}
		}
		for _, r := range *p.preplicas.Load() {
			if ok, why := r.caughtUp(); !ok {
				select {
				case <-r.done:
					stop := "its context ended"
					if r.err != nil {
						stop = r.err.Error()
					}
					return fmt.Errorf("lag probe: replica %s stopped being watched (%s): %s", r.name, stop, why)
				default:
				}
				if behind == "" {
					behind = why
				}
			}
		}
		if behind == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lag probe: not caught up: %s: %w", behind, ctx.Err())
		case <-t.C:
		}
	}
}
