package lagprobe

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"replab/internal/clock"
)

// memReplica is a replica in memory: writers commit by storing their seq;
// every other poll of a lazy replica shows nothing new.
type memReplica struct {
	rows  []atomic.Int64
	lazy  bool
	polls int
}

func (m *memReplica) Positions(_ context.Context, dst []int64) error {
	m.polls++
	if m.lazy && m.polls%2 == 0 {
		return nil
	}
	for w := range dst {
		dst[w] = m.rows[w].Load()
	}
	return nil
}

// TestConcurrentWritersAndWatchers runs writers and two watchers at once on
// the real clock and precise sleeper (run it with -race).
func TestConcurrentWritersAndWatchers(t *testing.T) {
	const writers, perWriter = 4, 3 * chunkLen
	p := New(Config{Writers: writers})
	var recorded, negative atomic.Int64
	p.onLag = func(_ string, _ int, _, lag int64) {
		recorded.Add(1)
		if lag < 0 {
			negative.Add(1)
		}
	}
	db := &memReplica{rows: make([]atomic.Int64, writers)}
	fast, lazy := &memReplica{rows: db.rows}, &memReplica{rows: db.rows, lazy: true}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for name, q := range map[string]Querier{"fast": fast, "lazy": lazy} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.Watch(ctx, name, q)
		}()
	}
	if err := p.WaitWatching(ctx, "fast", "lazy"); err != nil {
		t.Fatal(err)
	}

	var committed atomic.Int64
	var ww sync.WaitGroup
	for i := range writers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			w := p.Writer(i)
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for n := range perWriter {
				seq := w.Next()
				if r.IntN(20) == 0 {
					continue // aborted before COMMIT
				}
				measured := n >= perWriter/10
				w.Sending(seq, clock.Now(), measured)
				ok := r.IntN(10) != 0
				if ok {
					db.rows[i].Store(seq) // the commit
					if measured {
						committed.Add(1)
					}
				}
				w.Done(seq, ok)
				if n%64 == 0 {
					time.Sleep(50 * time.Microsecond)
				}
				if seq%chunkLen == 0 {
					// Let both watchers catch up, so a later Next
					// releases the chunks behind them.
					for t0 := time.Now(); p.lowWater(i) < db.rows[i].Load() && time.Since(t0) < 5*time.Second; {
						time.Sleep(time.Millisecond)
					}
				}
			}
		}()
	}
	ww.Wait()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	if err := p.WaitCaughtUp(wctx); err != nil {
		t.Error(err)
	}
	wcancel()
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	res := p.Results()
	for _, name := range []string{"fast", "lazy"} {
		r := res[name]
		if r.Tracked != committed.Load() || r.NotVisibleAtEnd != 0 || r.LagMs.Count+r.VisibleBeforeWatch != r.Tracked {
			t.Errorf("%s: tracked %d (want %d), not visible %d, observed %d, before watch %d", name,
				r.Tracked, committed.Load(), r.NotVisibleAtEnd, r.LagMs.Count, r.VisibleBeforeWatch)
		}
		t.Logf("%s: %d lags, p50 %.3f ms, p99 %.3f ms, max %.3f ms; %d polls, resolution %.3f ms, interval p99 %.3f ms",
			name, r.LagMs.Count, r.LagMs.P50, r.LagMs.P99, r.LagMs.Max, r.Polls, r.ResolutionMs, r.IntervalP99Ms)
	}
	if n := recorded.Load(); n != res["fast"].LagMs.Count+res["lazy"].LagMs.Count || negative.Load() != 0 {
		t.Errorf("%d lags recorded (%d negative)", n, negative.Load())
	}
	for i := range writers {
		if w := p.Writer(i); w.freed == 0 {
			t.Errorf("writer %d released no chunks", i)
		}
	}
}

// BenchmarkWriter is the per-transaction cost for a user: Next, Sending,
// Done, with a replica that keeps up (chunks are released).
func BenchmarkWriter(b *testing.B) {
	p := New(Config{Writers: 1})
	r, _ := p.register("r", nil)
	w := p.Writer(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		seq := w.Next()
		w.Sending(seq, int64(i), true)
		w.Done(seq, true)
		if seq&chunkMask == 0 {
			r.low[0].Store(seq)
		}
	}
}

// BenchmarkWriterWatched runs the writer while a real watcher polls an
// in-memory replica every millisecond.
func BenchmarkWriterWatched(b *testing.B) {
	p := New(Config{Writers: 1})
	db := &memReplica{rows: make([]atomic.Int64, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Watch(ctx, "r", db) }()
	if err := p.WaitWatching(ctx, "r"); err != nil {
		b.Fatal(err)
	}
	w := p.Writer(0)
	for b.Loop() {
		seq := w.Next()
		w.Sending(seq, clock.Now(), true)
		db.rows[0].Store(seq)
		w.Done(seq, true)
	}
	b.StopTimer()
	cancel()
	<-done
}

// cpuQuerier measures the watcher's own thread: it answers instantly for
// 64 writers that each advance one seq per poll, and reads the thread's
// CPU time (the watcher's goroutine is locked to it).
type cpuQuerier struct {
	p       *Probe
	n, stop int
	cancel  func()
	cpu0    int64
	cpu1    int64
}

func threadCPU() int64 {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func (q *cpuQuerier) Positions(ctx context.Context, dst []int64) error {
	switch q.n {
	case 1:
		q.cpu0 = threadCPU()
	case q.stop:
		q.cpu1 = threadCPU()
		q.cancel()
		return ctx.Err()
	}
	q.n++
	for w := range dst {
		wr := q.p.Writer(w)
		s := wr.Next()
		wr.Sending(s, clock.Now(), true)
		wr.Done(s, true)
		dst[w] = s
	}
	return nil
}

// BenchmarkWatcher is one poll of a 1 ms watcher over 64 writers with a
// free querier: ns/op is the achieved interval, cpu-ns/poll the watcher
// thread's CPU time per poll (probe bookkeeping and sleeping, no SQL).
func BenchmarkWatcher(b *testing.B) {
	p := New(Config{Writers: 64})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := &cpuQuerier{p: p, stop: b.N + 1, cancel: cancel}
	b.ResetTimer()
	if err := p.Watch(ctx, "r", q); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	r := p.Results()["r"]
	b.ReportMetric(float64(q.cpu1-q.cpu0)/float64(b.N), "cpu-ns/poll")
	b.ReportMetric(r.ResolutionMs, "interval-ms")
	b.ReportMetric(r.IntervalP99Ms, "interval-p99-ms")
}
