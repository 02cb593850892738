package lagprobe

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// pstep is one poll of a scripted replica watched by position: do runs
// the writers' actions that happened before it, at is the position the
// replica shows, took how long the poll lasts on the virtual clock.
type pstep struct {
	do   func(p *Probe)
	at   int64
	took int64
	err  error
}

// pscript is a PositionQuerier replaying steps on a virtual clock; it
// cancels the watch after the last step.
type pscript struct {
	p      *Probe
	clock  *atomic.Int64
	steps  []pstep
	cancel func()
	n      int
	starts []int64
}

func (s *pscript) Applied(ctx context.Context) (int64, error) {
	if s.n >= len(s.steps) {
		s.cancel()
		return 0, ctx.Err()
	}
	st := s.steps[s.n]
	s.n++
	s.starts = append(s.starts, s.clock.Load())
	if st.do != nil {
		st.do(s.p)
	}
	s.clock.Add(st.took)
	return st.at, st.err
}

func prun(t *testing.T, p *Probe, clock *atomic.Int64, o WatchOptions, steps []pstep) (Result, *pscript, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &pscript{p: p, clock: clock, steps: steps, cancel: cancel}
	// A watcher with nothing to look for waits for a COMMIT: the next
	// step's actions happen then (without moving the clock), and the
	// watcher is woken as a COMMIT would wake it.
	p.idle = func() {
		if s.n < len(s.steps) && s.steps[s.n].do != nil {
			s.steps[s.n].do(p)
			s.steps[s.n].do = nil
		}
		for _, r := range *p.preplicas.Load() {
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
	err := p.WatchPositions(ctx, "r", s, o)
	return p.Results()["r"], s, err
}

// pcommit is writer w's whole transaction: COMMIT sent at sent, returned
// with position pos.
func pcommit(w int, sent, pos int64, measured, ok bool) func(p *Probe) {
	return func(p *Probe) {
		p.PosWriter(w).Sending(sent)
		p.PosWriter(w).Done(ok, pos, measured)
	}
}

func psend(w int, sent int64) func(p *Probe) {
	return func(p *Probe) { p.PosWriter(w).Sending(sent) }
}

func pdone(w int, pos int64) func(p *Probe) {
	return func(p *Probe) { p.PosWriter(w).Done(true, pos, true) }
}

// busy keeps writer w's next COMMIT in flight, so that the watcher keeps
// polling (it waits when nothing is in flight or unseen).
func busy(w int) func(p *Probe) { return psend(w, 0) }

type pcounts struct {
	Tracked, NotVisibleAtEnd, VisibleBeforeWatch, Unpositioned, Truncated int64
}

func TestLagByPosition(t *testing.T) {
	cases := []struct {
		name    string
		writers int
		skip    func(int) bool
		steps   []pstep
		lags    map[key]int64
		counts  pcounts
	}{
		{
			name:    "lag is the end of the first poll at or past the commit's position minus COMMIT sent",
			writers: 2,
			steps: []pstep{
				{at: 100, do: busy(1)},
				{at: 140, do: pcommit(0, 1*ms+200_000, 150, true, true)},
				{at: 149},
				{at: 150, took: 70_000},
				{at: 150},
			},
			lags:   map[key]int64{{0, 1}: 3*ms + 70_000 - (ms + 200_000)},
			counts: pcounts{Tracked: 1},
		},
		{
			name:    "every commit a poll passes gets its own lag, whichever writer",
			writers: 3,
			steps: []pstep{
				{at: 100, do: busy(2)},
				{at: 100, do: all(pcommit(0, 100, 110, true, true), pcommit(1, 300_000, 120, true, true), pcommit(0, 600_000, 130, true, true))},
				{at: 125},
				{at: 10_000},
			},
			lags:   map[key]int64{{0, 1}: 2*ms - 100, {1, 1}: 2*ms - 300_000, {0, 2}: 3*ms - 600_000},
			counts: pcounts{Tracked: 3},
		},
		{
			name:    "a commit the replica applied before its COMMIT returned is dated by the poll that showed it",
			writers: 1,
			steps: []pstep{
				{at: 100},
				{at: 100, do: psend(0, 1*ms+400_000)},
				{at: 160},
				{at: 170, do: pdone(0, 150)},
				{at: 170, do: busy(0)},
			},
			lags:   map[key]int64{{0, 1}: 2*ms - (ms + 400_000)},
			counts: pcounts{Tracked: 1},
		},
		{
			name:    "transactions outside the measure phase, failed ones and unknown positions get no lag",
			writers: 1,
			steps: []pstep{
				{at: 100, do: busy(0)},
				{at: 100, do: all(pcommit(0, 100, 110, false, true), pcommit(0, 200, 120, true, false), pcommit(0, 300, 0, true, true), pcommit(0, 400, 130, true, true), busy(0))},
				{at: 200},
			},
			lags:   map[key]int64{{0, 2}: 2*ms - 400},
			counts: pcounts{Tracked: 2, Unpositioned: 1},
		},
		{
			name:    "what the first poll shows has no lag",
			writers: 1,
			steps: []pstep{
				{at: 100, do: all(pcommit(0, 0, 90, true, true), busy(0))},
				{at: 100},
			},
			counts: pcounts{Tracked: 1, VisibleBeforeWatch: 1},
		},
		{
			name:    "commits never reached are not visible at the end",
			writers: 1,
			steps: []pstep{
				{at: 100},
				{at: 100, do: all(pcommit(0, ms+1, 150, true, true), pcommit(0, ms+2, 160, true, true))},
				{at: 155},
			},
			lags:   map[key]int64{{0, 1}: 2*ms - (ms + 1)},
			counts: pcounts{Tracked: 2, NotVisibleAtEnd: 1},
		},
		{
			name:    "a replica going back (restarted) counts nothing twice and hides nothing it showed",
			writers: 1,
			steps: []pstep{
				{at: 100},
				{at: 100, do: all(psend(0, ms+10), pdone(0, 150), psend(0, ms+20))},
				{at: 200},
				{at: 120, do: pdone(0, 190)}, // returned after the poll that showed it, and the replica went back
				{at: 150, do: busy(0)},
			},
			lags:   map[key]int64{{0, 1}: 2*ms - (ms + 10), {0, 2}: 2*ms - (ms + 20)},
			counts: pcounts{Tracked: 2},
		},
		{
			name:    "writers that write at this node are not watched here",
			writers: 2,
			skip:    func(w int) bool { return w == 1 },
			steps: []pstep{
				{at: 100},
				{at: 100, do: all(pcommit(0, ms, 110, true, true), pcommit(1, ms, 120, true, true), busy(0))},
				{at: 130},
			},
			lags:   map[key]int64{{0, 1}: 2*ms - ms},
			counts: pcounts{Tracked: 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, clock, lags := virtual(tc.writers, time.Millisecond)
			res, _, err := prun(t, p, clock, WatchOptions{Skip: tc.skip}, tc.steps)
			if err != nil {
				t.Fatal(err)
			}
			if len(lags) == 0 && len(tc.lags) == 0 {
				lags = nil
			}
			if !reflect.DeepEqual(lags, tc.lags) && !(len(lags) == 0 && len(tc.lags) == 0) {
				t.Errorf("lags (ns) %v, want %v", lags, tc.lags)
			}
			got := pcounts{res.Tracked, res.NotVisibleAtEnd, res.VisibleBeforeWatch, res.Unpositioned, res.Truncated}
			if got != tc.counts {
				t.Errorf("counts %+v, want %+v", got, tc.counts)
			}
			if res.Method != MethodPositions {
				t.Errorf("method %q", res.Method)
			}
			if res.Tracked != res.LagMs.Count+res.NotVisibleAtEnd+res.VisibleBeforeWatch+res.Unpositioned+res.Truncated {
				t.Errorf("tracked %d != %d observed + %d not visible + %d before watch + %d unpositioned + %d truncated",
					res.Tracked, res.LagMs.Count, res.NotVisibleAtEnd, res.VisibleBeforeWatch, res.Unpositioned, res.Truncated)
			}
		})
	}
}

// TestPositionWatcherPollsEveryIntervalWhileBusy: one poll per interval,
// however many commits, chained at exactly the interval on the virtual
// clock (resolution 1 ms); a failed poll is counted and retried.
func TestPositionWatcherPollsEveryIntervalWhileBusy(t *testing.T) {
	p, clock, lags := virtual(4, time.Millisecond)
	steps := []pstep{{at: 0, do: busy(0)}}
	pos := int64(0)
	for k := 1; k <= 100; k++ {
		var fs []func(*Probe)
		for w := range 4 {
			for range 5 { // 20 commits a millisecond
				pos += 10
				fs = append(fs, pcommit(w, int64(k)*ms-500, pos, true, true))
			}
		}
		fs = append(fs, busy(0))
		steps = append(steps, pstep{at: pos - 200, do: all(fs...), took: 50_000})
	}
	steps = append(steps, pstep{err: errors.New("broken")}, pstep{at: pos})
	res, s, err := prun(t, p, clock, WatchOptions{}, steps)
	if err != nil {
		t.Fatal(err)
	}
	if res.Polls != 102 || res.PollErrors != 1 || res.ResolutionMs != 1 {
		t.Errorf("polls %d, errors %d, resolution %.6f ms; want 102, 1, 1", res.Polls, res.PollErrors, res.ResolutionMs)
	}
	if res.Tracked != 2000 || res.LagMs.Count != 2000 || res.NotVisibleAtEnd != 0 || len(lags) != 2000 {
		t.Errorf("tracked %d, lags %d (%d seen), not visible %d; want 2000 all seen", res.Tracked, res.LagMs.Count, len(lags), res.NotVisibleAtEnd)
	}
	for k := 1; k < len(s.starts)-2; k++ {
		if d := s.starts[k] - s.starts[k-1]; d != ms {
			t.Fatalf("poll %d started %d ns after the one before, want 1 ms", k, d)
		}
	}
}

// TestPositionWatcherWaitsWhenIdle: with nothing in flight or unseen the
// watcher stops polling until a COMMIT is sent.
func TestPositionWatcherWaitsWhenIdle(t *testing.T) {
	p, clock, lags := virtual(1, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	idles := 0
	p.idle = func() {
		idles++
		switch idles {
		case 1: // after the baseline: a commit 10 s later
			clock.Store(10_000 * ms)
			pcommit(0, 10_000*ms, 150, true, true)(p)
		default:
			cancel()
		}
	}
	s := &pscript{p: p, clock: clock, cancel: cancel, steps: []pstep{{at: 100}, {at: 120}, {at: 150}, {at: 150}}}
	if err := p.WatchPositions(ctx, "r", s, WatchOptions{}); err != nil {
		t.Fatal(err)
	}
	res := p.Results()["r"]
	want := []int64{0, 10_000 * ms, 10_001 * ms}
	if !reflect.DeepEqual(s.starts, want) || res.IdleWaits != 2 {
		t.Errorf("polls started at %v (want %v), %d idle waits (want 2)", s.starts, want, res.IdleWaits)
	}
	if lags[key{0, 1}] != ms || res.ResolutionMs != 1 {
		t.Errorf("lags %v, resolution %.3f: want {0 1}: 1 ms, resolution 1 ms (the pause is not an interval)", lags, res.ResolutionMs)
	}
}

// TestWaitCaughtUpByPosition waits until the replica's position passes
// every commit.
func TestWaitCaughtUpByPosition(t *testing.T) {
	p, clock, _ := virtual(1, time.Millisecond)
	pcommit(0, 0, 150, true, true)(p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := &stepper{at: []int64{100, 120, 140, 160}}
	done := make(chan error, 1)
	go func() { done <- p.WatchPositions(ctx, "r", q, WatchOptions{}) }()
	_ = clock
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := p.WaitWatching(wctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitCaughtUp(wctx); err != nil {
		t.Fatal(err)
	}
	if n := q.n.Load(); n < 4 {
		t.Errorf("caught up after %d polls, want the 4th (position 160)", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// stepper shows positions in turn, then the last for ever, one per call.
type stepper struct {
	at []int64
	n  atomic.Int64
}

func (s *stepper) Applied(ctx context.Context) (int64, error) {
	k := s.n.Add(1) - 1
	time.Sleep(time.Millisecond)
	return s.at[min(int(k), len(s.at)-1)], nil
}
