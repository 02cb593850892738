package lagprobe

import (
	"context"
	"sync"
	"testing"
	"time"

	"replab/internal/clock"
)

// model is a replica where a writer's transaction becomes visible a lag
// after its COMMIT was sent, but not before the writer's previous one.
type model struct {
	mu  sync.Mutex
	vis [][]int64 // per writer, per seq-1: when it becomes visible
}

// send records a transaction sent at t with the given lag; it returns the
// true lag (longer if an earlier transaction is still in flight).
func (m *model) send(w int, t, lag int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := t + lag
	if n := len(m.vis[w]); n > 0 {
		v = max(v, m.vis[w][n-1])
	}
	m.vis[w] = append(m.vis[w], v)
	return v - t
}

func (m *model) Positions(_ context.Context, dst []int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock.Now()
	for w, vs := range m.vis {
		for s, v := range vs {
			if v <= now {
				dst[w] = int64(s + 1)
			}
		}
	}
	return nil
}

// TestAdaptivePollingFindsEveryTransactionWithFewPolls runs one writer
// committing every 20 ms against a model replica on the real clock. The
// watcher must date every transaction no earlier than its true lag and
// within a few ms of it, while polling far less than every millisecond;
// when the lag drops below the learnt floor mid-run, window hits lower the
// floor until lags are dated closely again.
func TestAdaptivePollingFindsEveryTransactionWithFewPolls(t *testing.T) {
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
			p := New(Config{Writers: 1})
			m := &model{vis: [][]int64{nil}}
			truth := make([]int64, n)
			var mu sync.Mutex
			lags := make([]int64, n)
			p.onLag = func(_ string, _ int, seq, lag int64) { mu.Lock(); lags[seq-1] = lag; mu.Unlock() }
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- p.Watch(ctx, "m", m) }()
			if err := p.WaitWatching(ctx, "m"); err != nil {
				t.Fatal(err)
			}
			t0 := clock.Now()
			w := p.Writer(0)
			for i := range n {
				time.Sleep(time.Duration(t0 + int64(i)*int64(20*time.Millisecond) - clock.Now()))
				lag := tc.lag
				if i >= n/2 {
					lag = tc.lagAfter
				}
				s := w.Next()
				now := clock.Now()
				truth[i] = m.send(0, now, int64(lag))
				w.Sending(s, now, true)
				w.Done(s, true)
			}
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			if err := p.WaitCaughtUp(wctx); err != nil {
				t.Fatal(err)
			}
			wcancel()
			elapsed := time.Duration(clock.Now() - t0)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			r := p.Results()["m"]
			t.Logf("%d polls in %s, %d idle waits, floor %.3f ms, %d window hits, lag p50 %.3f max %.3f ms, resolution %.3f ms",
				r.Polls, elapsed.Round(time.Millisecond), r.IdleWaits, r.FloorMs, r.WindowHits, r.LagMs.P50, r.LagMs.Max, r.ResolutionMs)
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
			// settled) are within a few ms of it.
			for i, l := range lags {
				if l < truth[i] {
					t.Errorf("transaction %d: lag %.3f ms below the true %.3f", i, float64(l)/1e6, float64(truth[i])/1e6)
				}
				if i >= n-10 && l > truth[i]+int64(5*time.Millisecond) {
					t.Errorf("transaction %d: lag %.3f ms, more than 5 ms above the true %.3f", i, float64(l)/1e6, float64(truth[i])/1e6)
				}
			}
		})
	}
}
