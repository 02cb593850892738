package lagprobe

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// key names one transaction.
type key struct {
	w   int
	seq int64
}

// step is one poll of a scripted replica: do runs the writers' actions
// that happened before it, vis is what the replica shows, took is how
// long the poll lasts on the virtual clock.
type step struct {
	do   func(p *Probe)
	vis  []int64
	took int64
	err  error
}

// script is a Querier replaying steps on a virtual clock; it cancels the
// watch after the last step.
type script struct {
	p      *Probe
	clock  *atomic.Int64
	steps  []step
	cancel func()
	n      int
	starts []int64
}

func (s *script) Positions(ctx context.Context, dst []int64) error {
	if s.n >= len(s.steps) {
		s.cancel()
		return ctx.Err()
	}
	st := s.steps[s.n]
	s.n++
	s.starts = append(s.starts, s.clock.Load())
	if st.do != nil {
		st.do(s.p)
	}
	if st.vis != nil {
		copy(dst, st.vis)
	}
	s.clock.Add(st.took)
	return st.err
}

// virtual returns a probe on a virtual clock starting at 0: the watcher's
// sleeps jump the clock to their deadline, so poll k of a script starts at
// exactly k intervals unless polls overrun.
func virtual(writers int, interval time.Duration) (*Probe, *atomic.Int64, map[key]int64) {
	var clock atomic.Int64
	p := New(Config{Writers: writers, Interval: interval, Now: clock.Load, PollAlways: true})
	p.sleep = func(ctx context.Context, deadline int64) bool {
		if ctx.Err() != nil {
			return false
		}
		if deadline > clock.Load() {
			clock.Store(deadline)
		}
		return true
	}
	lags := map[key]int64{}
	p.onLag = func(_ string, w int, seq, lag int64) { lags[key{w, seq}] = lag }
	return p, &clock, lags
}

// run watches replica "r" through the steps and returns its result.
func run(t *testing.T, p *Probe, clock *atomic.Int64, steps []step) (Result, *script, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &script{p: p, clock: clock, steps: steps, cancel: cancel}
	err := p.Watch(ctx, "r", s)
	return p.Results()["r"], s, err
}

// commit runs one whole transaction of writer w: COMMIT sent at sent.
func commit(w int, sent int64, measured, ok bool) func(p *Probe) {
	return func(p *Probe) {
		wr := p.Writer(w)
		s := wr.Next()
		wr.Sending(s, sent, measured)
		wr.Done(s, ok)
	}
}

// abort is an attempt that fails before COMMIT.
func abort(w int) func(p *Probe) {
	return func(p *Probe) { p.Writer(w).Next() }
}

// send starts a transaction whose COMMIT has not returned yet.
func send(w int, sent int64) func(p *Probe) {
	return func(p *Probe) {
		wr := p.Writer(w)
		wr.Sending(wr.Next(), sent, true)
	}
}

// done finishes writer w's last transaction.
func done(w int, ok bool) func(p *Probe) {
	return func(p *Probe) {
		wr := p.Writer(w)
		wr.Done(wr.next, ok)
	}
}

func all(fs ...func(p *Probe)) func(p *Probe) {
	return func(p *Probe) {
		for _, f := range fs {
			f(p)
		}
	}
}

// counts are the Result fields a case checks.
type counts struct {
	Tracked, NotVisibleAtEnd, VisibleBeforeWatch, FailedVisible, Stale, Regressions int64
}

func countsOf(r Result) counts {
	return counts{r.Tracked, r.NotVisibleAtEnd, r.VisibleBeforeWatch, r.FailedVisible, r.Stale, r.Regressions}
}

func TestLag(t *testing.T) {
	cases := []struct {
		name    string
		writers int
		steps   []step
		lags    map[key]int64
		counts  counts
	}{
		{
			name:    "lag is the end of the first poll that sees it minus COMMIT sent",
			writers: 1,
			steps: []step{
				{vis: []int64{0}},
				{do: commit(0, 200_000, true, true), vis: []int64{0}},
				{vis: []int64{1}},
			},
			lags:   map[key]int64{{0, 1}: 2*ms - 200_000},
			counts: counts{Tracked: 1},
		},
		{
			name:    "every transaction a step reveals gets its own lag",
			writers: 1,
			steps: []step{
				{vis: []int64{0}},
				{do: all(commit(0, 100, true, true), commit(0, 300_000, true, true), commit(0, 600_000, true, true)), vis: []int64{3}},
			},
			lags:   map[key]int64{{0, 1}: ms - 100, {0, 2}: ms - 300_000, {0, 3}: ms - 600_000},
			counts: counts{Tracked: 3},
		},
		{
			name:    "failed and aborted attempts leave gaps that are skipped",
			writers: 1,
			steps: []step{
				{vis: []int64{0}},
				{do: all(commit(0, 100_000, true, true), commit(0, 200_000, true, false), abort(0), commit(0, 300_000, true, true)), vis: []int64{1}},
				{vis: []int64{4}},
			},
			lags:   map[key]int64{{0, 1}: ms - 100_000, {0, 4}: 2*ms - 300_000},
			counts: counts{Tracked: 2},
		},
		{
			name:    "transactions outside the measure phase are followed but not recorded",
			writers: 1,
			steps: []step{
				{vis: []int64{0}},
				{do: all(commit(0, 100, false, true), commit(0, 200, true, true), commit(0, 300, false, true)), vis: []int64{3}},
			},
			lags:   map[key]int64{{0, 2}: ms - 200},
			counts: counts{Tracked: 1},
		},
		{
			name:    "a change visible before its COMMIT returns counts once Done says ok",
			writers: 1,
			steps: []step{
				{vis: []int64{0}},
				{do: send(0, 500_000), vis: []int64{1}},
				{do: done(0, true), vis: []int64{1}},
			},
			lags:   map[key]int64{{0, 1}: ms - 500_000},
			counts: counts{Tracked: 1},
		},
		{
			name:    "a COMMIT reported failed that still reached the replica is not counted",
			writers: 1,
			steps: []step{
				{vis: []int64{0}},
				{do: send(0, 500_000), vis: []int64{1}},
				{do: done(0, false), vis: []int64{1}},
			},
			lags:   map[key]int64{},
			counts: counts{FailedVisible: 1},
		},
		{
			name:    "what the first poll already sees has no lag",
			writers: 2,
			steps: []step{
				{do: all(commit(0, 100, true, true), commit(1, 100, true, true)), vis: []int64{1, 0}},
				{vis: []int64{1, 1}},
			},
			lags:   map[key]int64{{1, 1}: ms - 100},
			counts: counts{Tracked: 2, VisibleBeforeWatch: 1},
		},
		{
			name:    "a change is dated at the end of the poll that sees it, even one under way when COMMIT was sent",
			writers: 1,
			steps: []step{
				{vis: []int64{0}},
				{do: commit(0, 100_000, true, true), vis: []int64{1}, took: 300_000},
				{do: commit(0, 2*ms+200_000, true, true), vis: []int64{2}, took: 500_000},
			},
			lags:   map[key]int64{{0, 1}: ms + 300_000 - 100_000, {0, 2}: 500_000 - 200_000},
			counts: counts{Tracked: 2},
		},
		{
			name:    "committed transactions never seen are not visible at the end",
			writers: 2,
			steps: []step{
				{vis: []int64{0, 0}},
				{do: all(commit(0, 100, true, true), commit(0, 200, true, true), commit(1, 300, true, true), commit(1, 400, false, true)), vis: []int64{1, 0}},
			},
			lags:   map[key]int64{{0, 1}: ms - 100},
			counts: counts{Tracked: 3, NotVisibleAtEnd: 2},
		},
		{
			name:    "a seq this run never issued is stale and ignored",
			writers: 1,
			steps: []step{
				{vis: []int64{500}},
				{do: commit(0, 100, true, true), vis: []int64{500}},
				{vis: []int64{1}},
			},
			lags:   map[key]int64{{0, 1}: 2*ms - 100},
			counts: counts{Tracked: 1, Stale: 2},
		},
		{
			name:    "a replica going backwards does not count anything twice",
			writers: 1,
			steps: []step{
				{vis: []int64{0}},
				{do: all(commit(0, 100, true, true), commit(0, 200, true, true)), vis: []int64{2}},
				{vis: []int64{1}},
				{vis: []int64{2}},
			},
			lags:   map[key]int64{{0, 1}: ms - 100, {0, 2}: ms - 200},
			counts: counts{Tracked: 2, Regressions: 1},
		},
		{
			name:    "writers are independent",
			writers: 3,
			steps: []step{
				{vis: []int64{0, 0, 0}},
				{do: all(commit(0, 100, true, true), commit(1, 200, true, true), commit(2, 300, true, true)), vis: []int64{1, 0, 1}},
				{vis: []int64{1, 1, 1}},
			},
			lags:   map[key]int64{{0, 1}: ms - 100, {1, 1}: 2*ms - 200, {2, 1}: ms - 300},
			counts: counts{Tracked: 3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, clock, lags := virtual(tc.writers, time.Millisecond)
			res, _, err := run(t, p, clock, tc.steps)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(lags, tc.lags) {
				t.Errorf("lags (ns) %v, want %v", lags, tc.lags)
			}
			if got := countsOf(res); got != tc.counts {
				t.Errorf("counts %+v, want %+v", got, tc.counts)
			}
			if n := res.LagMs.Count; n != int64(len(tc.lags)) {
				t.Errorf("histogram holds %d lags, want %d", n, len(tc.lags))
			}
			if res.Forgotten != 0 || res.Tracked != res.LagMs.Count+res.NotVisibleAtEnd+res.VisibleBeforeWatch {
				t.Errorf("tracked %d != observed %d + not visible %d + before watch %d (forgotten %d)",
					res.Tracked, res.LagMs.Count, res.NotVisibleAtEnd, res.VisibleBeforeWatch, res.Forgotten)
			}
		})
	}
}

func TestPercentilesAndSeries(t *testing.T) {
	p, clock, _ := virtual(1, time.Millisecond)
	// Poll k starts at k ms. Second 0 sees one transaction (lag 1.5 ms),
	// second 1 none, second 2 one (lag 40 ms).
	steps := []step{{vis: []int64{0}}, {do: commit(0, 500_000, true, true), vis: []int64{0}}, {vis: []int64{1}}}
	for len(steps) < 2000 {
		steps = append(steps, step{})
	}
	steps = append(steps, step{do: commit(0, 1960*ms, true, true), vis: []int64{2}})
	res, _, err := run(t, p, clock, steps)
	if err != nil {
		t.Fatal(err)
	}
	l := res.LagMs
	if l.Count != 2 || res.LagMinMs != 1.5 || l.P50 != 1.5 || l.Max != 40 || !near(l.P99, 40) || !near(l.Mean, 20.75) {
		t.Errorf("lag %+v, want count 2, min 1.5, p50 1.5, p99 ≈ 40, max 40, mean ≈ 20.75", l)
	}
	want := []SecondStats{
		{Second: 0, Count: 1, P50Ms: 1.5, P99Ms: 1.5, MaxMs: 1.5},
		{Second: 1},
		{Second: 2, Count: 1, P50Ms: 40, P99Ms: 40, MaxMs: 40},
	}
	if len(res.Series) != len(want) {
		t.Fatalf("series %+v\nwant %+v", res.Series, want)
	}
	for i, g := range res.Series {
		w := want[i]
		if g.Second != w.Second || g.Count != w.Count || g.MaxMs != w.MaxMs || !near(g.P50Ms, w.P50Ms) || !near(g.P99Ms, w.P99Ms) {
			t.Errorf("second %d: %+v, want %+v", i, g, w)
		}
	}
	if res.ResolutionMs != 1 || res.Polls != 2001 {
		t.Errorf("resolution %v ms over %d polls, want 1 ms over 2001", res.ResolutionMs, res.Polls)
	}
}

// near is within HdrHistogram's 2 significant digits.
func near(got, want float64) bool { return got >= want*0.99 && got <= want*1.01 }

func TestPollsThatOverrunGoBackToBack(t *testing.T) {
	p, clock, _ := virtual(1, time.Millisecond)
	_, s, err := run(t, p, clock, []step{
		{vis: []int64{0}, took: 2500_000},
		{took: 2500_000},
		{took: 300_000},
		{},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 2500_000, 5000_000, 6000_000}
	if !reflect.DeepEqual(s.starts[:4], want) {
		t.Errorf("poll starts %v, want %v", s.starts, want)
	}
	res := p.Results()["r"]
	if res.ResolutionMs != 2 || res.PollMaxMs != 2.5 {
		t.Errorf("resolution %v ms, poll max %v ms; want 2, 2.5", res.ResolutionMs, res.PollMaxMs)
	}
}

func TestPollErrors(t *testing.T) {
	boom := errors.New("connection refused")
	t.Run("a failing first poll stops the watch", func(t *testing.T) {
		p, clock, _ := virtual(1, time.Millisecond)
		_, _, err := run(t, p, clock, []step{{err: boom}})
		if err == nil || !strings.Contains(err.Error(), "replica r: first poll: connection refused") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("later failures are counted and retried with backoff", func(t *testing.T) {
		p, clock, lags := virtual(1, time.Millisecond)
		res, s, err := run(t, p, clock, []step{
			{vis: []int64{0}},
			{do: commit(0, 100, true, true), err: boom},
			{err: boom},
			{vis: []int64{1}},
		})
		if err != nil {
			t.Fatal(err)
		}
		// 1 ms, then 1+2 ms backoff, then 3+4 ms.
		if want := []int64{0, ms, 3 * ms, 7 * ms}; !reflect.DeepEqual(s.starts[:4], want) {
			t.Errorf("poll starts %v, want %v", s.starts, want)
		}
		if res.PollErrors != 2 || res.LastError != "connection refused" || lags[key{0, 1}] != 7*ms-100 {
			t.Errorf("errors %d (%q), lags %v", res.PollErrors, res.LastError, lags)
		}
	})
}

func TestReplicasAreIndependent(t *testing.T) {
	p, _, lags := virtual(2, time.Millisecond)
	near, err := p.register("near", nil)
	if err != nil {
		t.Fatal(err)
	}
	far, _ := p.register("far", nil)
	if _, err := p.register("far", nil); err == nil {
		t.Error("watching one replica twice was accepted")
	}
	byReplica := map[string]map[key]int64{"near": {}, "far": {}}
	p.onLag = func(r string, w int, seq, lag int64) { byReplica[r][key{w, seq}] = lag }
	near.observe(0, 0, []int64{0, 0}, true)
	far.observe(0, 0, []int64{0, 0}, true)
	commit(0, 100, true, true)(p)
	commit(1, 200, true, true)(p)
	near.observe(ms, ms, []int64{1, 1}, true)
	far.observe(ms, ms, []int64{0, 1}, true)
	far.observe(50*ms, 50*ms, []int64{1, 1}, true)
	want := map[string]map[key]int64{
		"near": {{0, 1}: ms - 100, {1, 1}: ms - 200},
		"far":  {{0, 1}: 50*ms - 100, {1, 1}: ms - 200},
	}
	if !reflect.DeepEqual(byReplica, want) {
		t.Errorf("lags %v, want %v", byReplica, want)
	}
	_ = lags
	commit(0, 60*ms, true, true)(p)
	near.observe(61*ms, 61*ms, []int64{2, 1}, true)
	res := p.Results()
	if res["near"].NotVisibleAtEnd != 0 || res["far"].NotVisibleAtEnd != 1 || res["far"].Tracked != 3 {
		t.Errorf("near %+v\nfar %+v", countsOf(res["near"]), countsOf(res["far"]))
	}
}

// TestSkippedWritersAreNotWatched: a multi-master node skips its own
// users: their transactions get no lag there, do not count in its
// Tracked or deferred queue, and do not hold up WaitCaughtUp.
func TestSkippedWritersAreNotWatched(t *testing.T) {
	p, _, _ := virtual(2, time.Millisecond)
	m1, _ := p.register("m1", func(w int) bool { return w == 0 })
	m2, _ := p.register("m2", func(w int) bool { return w == 1 })
	seen := map[string][]int{}
	p.onLag = func(r string, w int, _, _ int64) { seen[r] = append(seen[r], w) }
	m1.observe(0, 0, []int64{0, 0}, true)
	m2.observe(0, 0, []int64{0, 0}, true)
	commit(0, 100, true, true)(p)
	commit(1, 200, true, true)(p)
	commit(1, 300, true, true)(p)
	m1.observe(ms, ms, []int64{1, 2}, true) // its own writer 0 shows at once
	m2.observe(ms, ms, []int64{0, 2}, true) // writer 0's change has not arrived
	if !reflect.DeepEqual(seen, map[string][]int{"m1": {1, 1}}) {
		t.Errorf("lags recorded for writers %v, want m1: [1 1] only", seen)
	}
	res := p.Results()
	if r := res["m1"]; r.Tracked != 2 || r.LagMs.Count != 2 || r.NotVisibleAtEnd != 0 {
		t.Errorf("m1: %+v, want tracked 2 (writer 1), 2 lags, none deferred", countsOf(r))
	}
	if r := res["m2"]; r.Tracked != 1 || r.LagMs.Count != 0 || r.NotVisibleAtEnd != 1 {
		t.Errorf("m2: %+v, want tracked 1 (writer 0), no lag, 1 deferred", countsOf(r))
	}
	if _, ok := m1.window(); ok {
		t.Error("m1 has something to poll for, but only its own writer's transaction is outstanding")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.WaitCaughtUp(ctx); err == nil {
		t.Error("caught up while m2 has not seen writer 0")
	}
	m2.observe(2*ms, 2*ms, []int64{1, 2}, true)
	if err := p.WaitCaughtUp(context.Background()); err != nil {
		t.Errorf("not caught up once m2 saw writer 0: %v", err)
	}
}

func TestWaitCaughtUp(t *testing.T) {
	p, _, _ := virtual(1, time.Millisecond)
	r, _ := p.register("r", nil)
	r.observe(0, 0, []int64{0}, true)
	commit(0, 100, true, true)(p)
	commit(0, 200, false, true)(p) // cooldown: not waited for
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := p.WaitCaughtUp(ctx)
	if err == nil || !strings.Contains(err.Error(), "replica r shows writer 0 at seq 0, want 1") {
		t.Errorf("got %v", err)
	}
	r.observe(ms, ms, []int64{1}, true)
	if err := p.WaitCaughtUp(context.Background()); err != nil {
		t.Error(err)
	}
	commit(0, 300, true, true)(p)
	r.err = errors.New("boom")
	close(r.done)
	if err := p.WaitCaughtUp(context.Background()); err == nil || !strings.Contains(err.Error(), "stopped being watched (boom)") {
		t.Errorf("got %v", err)
	}
}

func TestWaitWatching(t *testing.T) {
	p, _, _ := virtual(1, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.WaitWatching(ctx, "a"); err == nil || !strings.Contains(err.Error(), "first poll of a (not watched yet)") {
		t.Errorf("got %v", err)
	}
	a, _ := p.register("a", nil)
	b, _ := p.register("b", nil)
	a.observe(0, 0, []int64{0}, true)
	if err := p.WaitWatching(context.Background(), "a"); err != nil {
		t.Error(err)
	}
	b.err = errors.New("lag probe: replica b: first poll: no such table")
	close(b.done)
	if err := p.WaitWatching(context.Background(), "a", "b"); err != b.err {
		t.Errorf("got %v, want %v", err, b.err)
	}
}

func TestJournalReleasesWhatEveryReplicaHasSeen(t *testing.T) {
	p, _, _ := virtual(1, time.Millisecond)
	w := p.Writer(0)
	for range 3 * chunkLen {
		commit(0, 1, true, true)(p)
	}
	if w.freed != 0 {
		t.Fatalf("released %d chunks with no replica watched", w.freed)
	}
	a, _ := p.register("a", nil)
	b, _ := p.register("b", nil)
	a.observe(0, 0, []int64{0}, true)
	b.observe(0, 0, []int64{0}, true)
	a.observe(ms, ms, []int64{3 * chunkLen}, true)
	b.observe(ms, ms, []int64{chunkLen + 5}, true)
	commit(0, 1, true, true)(p) // starts chunk 3
	if w.freed != 1 {
		t.Errorf("released %d chunks, want 1 (b still needs chunk 1)", w.freed)
	}
	if _, ok := w.load(chunkLen); ok {
		t.Error("seq in a released chunk still readable")
	}
	b.observe(2*ms, 2*ms, []int64{3*chunkLen + 1}, true)
	if got := b.lag.TotalCount(); got != 3*chunkLen+1 {
		t.Errorf("b recorded %d lags", got)
	}
}

func TestSendingUnissuedSeqPanics(t *testing.T) {
	p := New(Config{Writers: 1})
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	p.Writer(0).Sending(1, 0, true)
}

// timed is a script that reports its own read times: each poll's end
// moved back by back (a reader across a WAN correcting for the way home).
type timed struct {
	*script
	back int64
}

func (q *timed) TimedPositions(ctx context.Context, dst []int64) (int64, int64, error) {
	start := q.clock.Load()
	err := q.Positions(ctx, dst)
	return start, q.clock.Load() - q.back, err
}

func TestTimedQuerierTimesAreUsed(t *testing.T) {
	for _, back := range []int64{0, 3 * ms} {
		p, clock, lags := virtual(1, time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		q := &timed{script: &script{p: p, clock: clock, cancel: cancel, steps: []step{
			{vis: []int64{0}, took: 4 * ms},
			{do: commit(0, 4*ms, true, true), took: 4 * ms},
			{vis: []int64{1}, took: 6 * ms},
			{},
		}}, back: back}
		if err := p.Watch(ctx, "r", q); err != nil {
			t.Fatal(err)
		}
		cancel()
		// Seen by the poll that ends at 4+4+1(sleep)… on the virtual clock:
		// what the querier says, minus its correction.
		want := q.starts[2] + 6*ms - back - 4*ms
		if got := lags[key{0, 1}]; got != want {
			t.Errorf("back %d ms: lag %d ns, want %d (the querier's end minus COMMIT sent)", back/ms, got, want)
		}
	}
}
