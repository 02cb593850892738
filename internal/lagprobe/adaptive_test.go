package lagprobe

import (
	"context"
	"testing"
	"time"
)

// sim is one writer committing every 20 ms against a model replica where
// a transaction becomes visible a lag after its COMMIT was sent, but not
// before the previous one, all on a virtual clock: the watcher's sleeps
// and idle waits move the clock, transactions happen as it passes their
// time, and a poll reads the replica as of its start and takes pollNs.
// The watcher runs in the test's goroutine, so a run is the same every
// time, however busy the machine is.
type sim struct {
	p        *Probe
	now      int64
	n        int
	every    int64
	pollNs   int64
	lag      func(i int) int64
	next     int     // the next transaction to commit
	vis      []int64 // per transaction: when it becomes visible
	truth    []int64 // per transaction: its true lag
	finished func()  // called when idle after the last transaction
}

// commitDue commits every transaction whose time has come by t.
func (s *sim) commitDue(t int64) {
	w := s.p.Writer(0)
	for ; s.next < s.n && int64(s.next)*s.every <= t; s.next++ {
		sent := int64(s.next) * s.every
		v := sent + s.lag(s.next)
		if s.next > 0 {
			v = max(v, s.vis[s.next-1])
		}
		s.vis = append(s.vis, v)
		s.truth = append(s.truth, v-sent)
		seq := w.Next()
		w.Sending(seq, sent, true)
		w.Done(seq, true)
	}
}

func (s *sim) Positions(_ context.Context, dst []int64) error {
	s.commitDue(s.now)
	for i, v := range s.vis {
		if v <= s.now {
			dst[0] = int64(i + 1)
		}
	}
	s.now += s.pollNs
	return nil
}

func (s *sim) sleep(ctx context.Context, deadline int64) bool {
	if ctx.Err() != nil {
		return false
	}
	if deadline > int64(s.n)*s.every+int64(time.Minute) {
		s.finished() // a watcher that never goes idle would poll forever
		return false
	}
	s.commitDue(deadline)
	s.now = max(s.now, deadline)
	return true
}

func (s *sim) idle() {
	if s.next == s.n {
		s.finished()
		return
	}
	s.now = max(s.now, int64(s.next)*s.every)
	s.commitDue(s.now) // Sending wakes the watcher
}

// TestAdaptivePollingFindsEveryTransactionWithFewPolls runs one writer
// committing every 20 ms against a model replica on a virtual clock, with
// polls of 0.3 ms every 1 ms. The watcher must date every transaction no
// earlier than its true lag and, once the floor has settled, less than an
// interval and a poll later, while polling far less than every
// millisecond; when the lag drops below the learnt floor mid-run, window
// hits lower the floor until lags are dated closely again.
func TestAdaptivePollingFindsEveryTransactionWithFewPolls(t *testing.T) {
	const interval, pollNs = time.Millisecond, int64(300 * time.Microsecond)
	for _, tc := range []struct {
		name          string
		lag, lagAfter time.Duration
		wantHits      bool
	}{
		{name: "steady 15ms", lag: 15 * time.Millisecond, lagAfter: 15 * time.Millisecond},
		{name: "drops 30ms to 5ms", lag: 30 * time.Millisecond, lagAfter: 5 * time.Millisecond, wantHits: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 60
			s := &sim{n: n, every: int64(20 * time.Millisecond), pollNs: pollNs, lag: func(i int) int64 {
				if i >= n/2 {
					return int64(tc.lagAfter)
				}
				return int64(tc.lag)
			}}
			s.p = New(Config{Writers: 1, Interval: interval, Now: func() int64 { return s.now }})
			s.p.sleep, s.p.idle = s.sleep, s.idle
			lags := make([]int64, n)
			s.p.onLag = func(_ string, _ int, seq, lag int64) { lags[seq-1] = lag }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s.finished = cancel
			if err := s.p.Watch(ctx, "m", s); err != nil {
				t.Fatal(err)
			}
			if err := s.p.WaitCaughtUp(ctx); err != nil {
				t.Fatal(err) // the watch ended with everything seen
			}
			elapsed := time.Duration(s.now)
			r := s.p.Results()["m"]
			t.Logf("%d polls in %s, %d idle waits, floor %.3f ms, %d window hits, lag p50 %.3f max %.3f ms, resolution %.3f ms",
				r.Polls, elapsed, r.IdleWaits, r.FloorMs, r.WindowHits, r.LagMs.P50, r.LagMs.Max, r.ResolutionMs)
			if r.LagMs.Count != n || r.NotVisibleAtEnd != 0 {
				t.Fatalf("%d lags, %d not visible, want %d and 0", r.LagMs.Count, r.NotVisibleAtEnd, n)
			}
			if r.Polls > int64(elapsed/time.Millisecond)/2 {
				t.Errorf("%d polls in %s: want well under one per ms", r.Polls, elapsed)
			}
			if (r.WindowHits > 0) != tc.wantHits {
				t.Errorf("%d window hits, want some: %v", r.WindowHits, tc.wantHits)
			}
			// Lags are never below the truth; the last ten (after the floor
			// settled) are late by less than an interval and a poll.
			for i, l := range lags {
				if l < s.truth[i] {
					t.Errorf("transaction %d: lag %.3f ms below the true %.3f", i, float64(l)/1e6, float64(s.truth[i])/1e6)
				}
				if i >= n-10 && l >= s.truth[i]+int64(interval)+pollNs {
					t.Errorf("transaction %d: lag %.3f ms, an interval and a poll or more above the true %.3f", i, float64(l)/1e6, float64(s.truth[i])/1e6)
				}
			}
		})
	}
}
