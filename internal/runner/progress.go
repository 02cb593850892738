package runner

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/report"
	"replab/internal/workload"
)

// What the user sees while a run goes on: the loading line, and one line
// a second while the driver runs.

// load fills the initial data from the source's own site, with a progress
// line (rows/s and ETA).
func (r *run) load(ctx context.Context, src engine.Node) error {
	total := r.wl.TotalRows()
	if total == 0 {
		return nil
	}
	ld, err := r.loader(ctx, src)
	if err != nil {
		return err
	}
	defer ld.Close()
	start := time.Now()
	last := time.Time{}
	progress := func(rows int64) {
		if time.Since(last) < 500*time.Millisecond && rows < total {
			return
		}
		last = time.Now()
		el := time.Since(start).Seconds()
		rate := float64(rows) / max(el, 1e-9)
		eta := time.Duration(float64(total-rows)/max(rate, 1e-9)) * time.Second
		line := fmt.Sprintf("loading %s: %d/%d rows (%.0f%%), %.0f rows/s, ETA %s", r.wl.Name(), rows, total, 100*float64(rows)/float64(total), rate, eta.Round(time.Second))
		if r.opt.Live {
			fmt.Fprintf(r.log, "\r%-100s", line)
		} else {
			fmt.Fprintln(r.log, line)
		}
	}
	if err := r.wl.Load(ctx, ld, progress); err != nil {
		return fmt.Errorf("load %s: %w", r.wl.Name(), err)
	}
	el := time.Since(start).Seconds()
	if r.opt.Live {
		fmt.Fprintln(r.log)
	}
	r.loaded = &report.Load{Rows: total, Seconds: el, RowsPerS: float64(total) / max(el, 1e-9)}
	fmt.Fprintf(r.log, "loaded %d rows in %.1f s (%.0f rows/s)\n", total, el, r.loaded.RowsPerS)
	return nil
}

// loader is the engine's bulk path, or multi-row INSERTs, from the
// source's own site.
func (r *run) loader(ctx context.Context, src engine.Node) (workload.Loader, error) {
	if bl, ok := r.cluster.(engine.BulkLoader); ok {
		return bl.Loader(ctx, src.Name, src.Site)
	}
	sc, ok := r.cluster.(engine.SQL)
	if !ok {
		return nil, fmt.Errorf("engine %s can neither bulk load nor run SQL: the %s workload cannot load its data", r.eng.Kind(), r.wl.Name())
	}
	db, err := sc.Open(ctx, src.Name, src.Site)
	if err != nil {
		return nil, err
	}
	return &closingLoader{Loader: enginekit.InsertLoader(db, sc.Dialect()), db: db}, nil
}

// closingLoader closes its pool with it.
type closingLoader struct {
	workload.Loader
	db *sql.DB
}

func (l *closingLoader) Close() error { return l.db.Close() }

// transactions is the measure phase's count of transactions: [run]
// transactions, or what the workload asks for (dml-stream's operations);
// 0 measures for the duration.
func (r *run) transactions() int64 {
	if r.s.Run.Transactions > 0 {
		return r.s.Run.Transactions
	}
	if c, ok := r.wl.(workload.Counted); ok {
		return c.MeasureTransactions()
	}
	return 0
}

func (r *run) driverConfig() driver.Config {
	rs := r.s.Run
	cfg := driver.Config{
		Users: rs.Users, Warmup: rs.Warmup, Duration: rs.Duration, Cooldown: rs.Cooldown,
		RatePerSec: rs.RatePerSec, Poisson: rs.Arrival != "regular", ThinkMin: rs.ThinkMin, ThinkMax: rs.ThinkMax,
		Seed: measureSeed(rs.Seed, r.measured), MaxErrorPct: rs.MaxErrorPct, MaxRetries: 3,
		Classify:     func(err error) engine.ErrorClass { return engine.Classify(r.cluster, err) },
		LagEvery:     rs.LagSample,
		Transactions: r.transactions(),
	}
	cfg.MeasureEnded = func(at time.Time) {
		// The count ended the measure phase: it is shorter than the
		// duration the monitors and the faults were told.
		r.phaseMu.Lock()
		from := r.phaseFrom
		r.phaseTo = at
		r.phaseMu.Unlock()
		if r.mon != nil {
			r.mon.MarkMeasure(from, at)
		}
		fmt.Fprintf(r.log, "\nmeasure phase: %d transactions done after %.1f s; cooldown %s\n", cfg.Transactions, at.Sub(from).Seconds(), rs.Cooldown)
	}
	if sc, ok := r.cluster.(engine.SQL); ok && r.s.VerifyOn() {
		// Journal every writing transaction, under writers of this
		// measurement's own.
		cfg.AckStatement, _ = enginekit.AckInsertSQL(sc.Dialect())
		cfg.AckWriterBase = r.ackWriterBase()
		if cp, ok := r.cluster.(engine.ConnPlacer); ok {
			cfg.ConnNode = cp.ConnNode // which node acknowledged each commit
		}
	}
	if len(r.s.Faults) > 0 && !r.s.Written("run.max_error_pct") {
		// Faults make transactions fail on purpose: the error cut-off
		// would end the run at the first one.
		cfg.MaxErrorPct = 100
	}
	if p, ok := r.cluster.(engine.Pipeliner); ok {
		cfg.Pipeliner = p
	}
	// The stamp travels in an SQL statement of the transaction, or, for
	// operations that are not SQL, in the operation's own commit
	// (workload.OpCall).
	if r.stamps != nil && (r.stampSQL != "" || workload.OpsOnly(r.wl.Transactions())) {
		cfg.Lag = func(i int) driver.LagJournal { return r.probe.Writer(i) }
		cfg.LagStatement = r.stampSQL
	}
	r.lagConfig(&cfg)
	if r.opt.live != nil {
		cfg.Observer = r.opt.live
	}
	var marked sync.Once
	cfg.Progress = func(p driver.Progress) {
		r.opt.live.Phase(p.Phase)
		marked.Do(func() {
			// The driver's clock started p.Elapsed ago; the measure phase
			// follows the warmup. Only it counts in the monitors' summary.
			start := time.Now().Add(-p.Elapsed).Add(rs.Warmup)
			r.phaseMu.Lock()
			r.phaseFrom, r.phaseTo = start, start.Add(rs.Duration)
			r.phaseMu.Unlock()
			if r.mon != nil {
				r.mon.MarkMeasure(start, start.Add(rs.Duration))
			}
			r.faults.measureStarted(start)
			r.conflicts.measureStarted()
		})
		line := fmt.Sprintf("%-8s %5.0fs/%.0fs  %7.0f tps  p99 %7.2f ms  errors %d  %s",
			p.Phase, p.Elapsed.Seconds(), (p.Elapsed + p.Remaining).Seconds(), p.TPS, p.P99Ms, p.Errors, r.liveLinks())
		if r.opt.Live {
			fmt.Fprintf(r.log, "\r%-120s", line)
		} else {
			fmt.Fprintln(r.log, line)
		}
	}
	return cfg
}

// liveLinks summarises link use for the progress line: the busiest
// direction's utilisation since the previous call, and the worst lag
// seen at any replica in the last second.
func (r *run) liveLinks() string {
	now := time.Now()
	out := ""
	if r.lab == nil {
		// target mode: no links of replab's
	} else if em := r.lab.Emulator(); em != nil {
		if r.lastBytes == nil {
			r.lastBytes = map[string]uint64{}
		}
		el := now.Sub(r.lastAt).Seconds()
		best, bestPct := "", -1.0
		for _, d := range em.Stats() {
			k := d.From + "->" + d.To
			delta := d.Counters.DeliveredBytes - r.lastBytes[k]
			r.lastBytes[k] = d.Counters.DeliveredBytes
			if r.lastAt.IsZero() || d.Params.RateBps == 0 {
				continue
			}
			if pct := float64(delta) * 8 / el / float64(d.Params.RateBps) * 100; pct > bestPct {
				best, bestPct = k, pct
			}
		}
		r.lastAt = now
		if best != "" {
			out = fmt.Sprintf("busiest link %s %.1f%%", best, bestPct)
		}
	}
	worst := 0.0
	for _, res := range r.probe.Results() {
		if n := len(res.Series); n > 0 {
			worst = max(worst, res.Series[n-1].MaxMs)
		}
	}
	if worst > 0 {
		out += fmt.Sprintf("  worst lag %.0f ms", worst)
	}
	return out
}

// measureSeed is the driver's seed for the lab's n-th measurement (from
// 1): the spec's for the first, and one of its own for each further
// repetition or search step. The same draws again would replay the first
// measurement's transactions on data that already holds them — an update
// writing what is already there, which MariaDB reports as no row changed.
func measureSeed(seed int64, n int) int64 {
	return seed + int64(max(n-1, 0))<<32
}
