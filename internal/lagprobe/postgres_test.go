package lagprobe

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"replab/internal/engine/postgres/pgtest"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// standbySpec is a primary and one physical standby 50 ms (one way) apart.
const standbySpec = `
[lab]
name = "NAME"
[site.primary]
[site.eu]
[[link]]
sites = ["primary", "eu"]
delay = "50ms"
rate = "1gbit"
[engine]
kind = "postgres"
[node.p1]
site = "primary"
role = "primary"
[node.e1]
site = "eu"
role = "standby"
from = "p1"
[scheme]
replication = "async"
`

// TestPostgresStandbyAcross50ms: 4 writers commit 20 transactions a
// second in total at the primary for 3 s; the standby 50 ms away sees each
// one at least 50 ms after its COMMIT was sent, and at this low load
// usually within a few ms more.
func TestPostgresStandbyAcross50ms(t *testing.T) {
	_, c := pgtest.Up(t, "lagp", standbySpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const writers, perWriter = 4, 15 // 5 tx/s each for 3 s
	p := New(Config{Writers: writers})
	if err := c.(engine.SQL).ApplySchema(ctx, engine.Schema{Tables: []engine.Table{enginekit.LagTable()}}); err != nil {
		t.Fatal(err)
	}
	prim, err := c.(engine.SQL).Open(ctx, "p1", "primary")
	if err != nil {
		t.Fatal(err)
	}
	defer prim.Close()
	stamps, update, err := enginekit.StampsOf(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := stamps.ResetLag(ctx, writers); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	stby, err := c.(engine.SQL).Open(ctx, "e1", "eu") // polls stay inside the standby's site
	if err != nil {
		t.Fatal(err)
	}
	defer stby.Close()
	var lags []int64
	var lagMu sync.Mutex
	p.onLag = func(_ string, w int, seq, lag int64) {
		lagMu.Lock()
		lags = append(lags, lag)
		lagMu.Unlock()
		if lag < int64(50*time.Millisecond) {
			t.Errorf("writer %d seq %d: lag %.3f ms, below the link's 50 ms", w, seq, float64(lag)/1e6)
		}
	}
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	sq, err := stamps.LagReader(ctx, "e1") // the engine's own reader
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	cq := &cpuCounting{q: sq}
	go func() { watched <- p.Watch(wctx, "e1", cq) }()
	if err := p.WaitWatching(ctx, "e1"); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := prim.Conn(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			w := p.Writer(i)
			start := time.Now().Add(time.Duration(i) * 50 * time.Millisecond)
			for n := range perWriter + 1 { // the first is warmup
				time.Sleep(time.Until(start.Add(time.Duration(n) * 200 * time.Millisecond)))
				if err := commitOne(ctx, conn, p, w, update, n > 0); err != nil {
					t.Errorf("writer %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
	if err := p.WaitCaughtUp(cctx); err != nil {
		t.Error(err)
	}
	ccancel()
	stopWatch()
	if err := <-watched; err != nil {
		t.Fatal(err)
	}

	r := p.Results()["e1"]
	t.Logf("lag at e1 over %d transactions: min %.3f p50 %.3f p90 %.3f p99 %.3f max %.3f mean %.3f ms",
		r.LagMs.Count, r.LagMinMs, r.LagMs.P50, r.LagMs.P90, r.LagMs.P99, r.LagMs.Max, r.LagMs.Mean)
	t.Logf("polls %d (%d errors), resolution %.4f ms, interval p99 %.3f ms, poll p50 %.3f p99 %.3f max %.3f ms",
		r.Polls, r.PollErrors, r.ResolutionMs, r.IntervalP99Ms, r.PollP50Ms, r.PollP99Ms, r.PollMaxMs)
	t.Logf("adaptive polling: floor %.3f ms, %d window hits, %d idle waits", r.FloorMs, r.WindowHits, r.IdleWaits)
	// Each transaction needs a few polls once its window opens (the floor,
	// a few ms under 50), and between them the watcher waits. How many
	// polls that makes depends on how late a busy machine makes the lags
	// (TestAdaptivePolling counts them on a virtual clock); that the
	// watcher waited at all does not: after the poll that sees the last
	// transaction it has nothing to look for, and a watcher polling as if
	// always on never waits.
	if r.IdleWaits == 0 {
		t.Errorf("%d polls and no idle wait: the watcher polled as if always on", r.Polls)
	}
	t.Logf("watcher thread CPU %.1f µs per poll (%.1f %% of a core)", float64(cq.cpu)/float64(cq.polls)/1e3,
		float64(cq.cpu)/float64(cq.polls)/(r.ResolutionMs*1e6)*100)
	if r.Tracked != writers*perWriter || r.LagMs.Count != r.Tracked || r.NotVisibleAtEnd != 0 || r.VisibleBeforeWatch != 0 {
		t.Errorf("tracked %d (want %d), observed %d, not visible at end %d, before watch %d",
			r.Tracked, writers*perWriter, r.LagMs.Count, r.NotVisibleAtEnd, r.VisibleBeforeWatch)
	}
	// Never below the link's delay (exact); the median about the delay,
	// not a multiple of it. How close is a benchmark figure: here a busy
	// shared machine delays replay and polls by tens of ms (p50 57 ms,
	// p99 300 ms seen beside a CPU hog), so the bound is generous; how
	// closely a poll dates a change is exact in TestLag.
	if r.LagMinMs < 50 || r.LagMs.P50 >= 150 {
		t.Errorf("lag min %.3f ms, p50 %.3f ms: want ≥ 50 and p50 < 150 on a 50 ms link at low load", r.LagMinMs, r.LagMs.P50)
	}
	// The achieved interval is a benchmark figure (make bench); here only
	// check that polls were chained at about the interval, not at some
	// multiple of it (1.6 ms seen beside a CPU hog).
	if r.ResolutionMs > 10 {
		t.Errorf("achieved poll interval %.3f ms, want about 1 ms (at most 10 on a busy machine)", r.ResolutionMs)
	}
	if len(lags) != int(r.LagMs.Count) {
		t.Errorf("%d lags seen by the hook, %d in the histogram", len(lags), r.LagMs.Count)
	}

	// The engine's reader and the generic database/sql one read what the
	// standby shows.
	for name, q := range map[string]engine.LagReader{"postgres": sq, "database/sql": &enginekit.SQLLagReader{DB: stby}} {
		got := make([]int64, writers)
		if err := q.Positions(ctx, got); err != nil {
			t.Fatal(err)
		}
		q.Close()
		for w, s := range got {
			if s != perWriter+1 {
				t.Errorf("%s reader: writer %d at seq %d, want %d", name, w, s, perWriter+1)
			}
		}
	}
}

// commitOne is one transaction as the driver runs it.
func commitOne(ctx context.Context, conn *sql.Conn, p *Probe, w *Writer, update string, measured bool) error {
	seq := w.Next()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, update, seq, w.ID())
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		_ = tx.Rollback()
		return fmt.Errorf("update of replab_lag changed %d rows, want 1: not seeded?", n)
	}
	w.Sending(seq, p.Now(), measured)
	err = tx.Commit()
	w.Done(seq, err == nil)
	return err
}

// cpuCounting adds up the CPU time of the watcher's thread (its goroutine is
// locked to it) spent in and between polls.
type cpuCounting struct {
	q         Querier
	last, cpu int64
	polls     int64
}

func (c *cpuCounting) Positions(ctx context.Context, dst []int64) error {
	now := threadCPU()
	if c.last != 0 {
		c.cpu += now - c.last
		c.polls++
	}
	c.last = now
	return c.q.Positions(ctx, dst)
}
