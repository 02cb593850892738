package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/clock"
	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/lagprobe"
	"replab/internal/stats"
)

// The position method's cost at 100 % coverage (issue 35), measured as
// the stamp probe's is (lagoverhead.go): each run alternates 2 s slices
// with every transaction followed by position and none, on the lag step's
// lab and transaction. On is what replab run does by default
// (lag_sample = "all"): every writing transaction reads its commit's
// position in the same write as its COMMIT (PostgreSQL: a fast-path call
// of pg_current_wal_flush_lsn() after the Sync), and the position watcher
// at the standby polls its applied position every 1 ms while a commit is
// in flight or unseen. Off follows nothing: the pipe sends the
// transaction alone, and the watcher, with nothing to look for, waits
// without polling.
const lagAllReps = 12

func (b *bench) lagAllOverhead(ctx context.Context) error { return b.lagAllOn(ctx, postgresLag) }

func (b *bench) lagAllOn(ctx context.Context, t lagTarget) error {
	p, err := b.upLagLab(ctx, t)
	if err != nil {
		return err
	}
	defer p.close()
	if _, ok := p.cluster.(engine.Positions); !ok {
		return fmt.Errorf("%s has no positions", t.engine.Kind())
	}
	if _, err := benchkit.WaitQuiet(ctx, quiet); err != nil {
		return err
	}
	alone, err := b.positionWatcherAlone(ctx, p)
	if err != nil {
		return fmt.Errorf("position watcher alone: %w", err)
	}
	logf("      position watcher alone (no workload): %.0f polls/s, every %.3f ms (p99 %.3f), poll p50 %.3f p99 %.3f ms; CPU %.1f µs/poll here (%.3f cores), %.1f µs/poll at the standby (%.3f cores)",
		alone.PollsPerS, alone.ResolutionMs, alone.IntervalP99Ms, alone.PollP50Ms, alone.PollP99Ms, alone.BenchUsPerPoll, alone.BenchCores, alone.StandbyUsPerPoll, alone.StandbyCores)
	var runs []lagRun
	for rep := range lagAllReps {
		r, err := b.lagAllRun(ctx, p, t, rep+1)
		if err != nil {
			return fmt.Errorf("all run %d: %w", rep+1, err)
		}
		runs = append(runs, r)
		logf("      all run %2d: %5.0f tps on, %5.0f off: %+6.2f %%; CPU µs/tx on/off: bench %.1f/%.1f, primary %.1f/%.1f, replica %.1f/%.1f (%+.2f %%); machine busy %.0f%%; %.0f followed/s on, %.0f polls/s on, %.0f off, every %.3f ms (p99 %.3f); %d of %d timed, lag p50 %.1f p99 %.1f ms",
			rep+1, r.TPSOn, r.TPSOff, r.OverheadPct, r.BenchCPUOnUs, r.BenchCPUOffUs, r.PrimaryOnUs, r.PrimaryOffUs, r.StandbyOnUs, r.StandbyOffUs, r.CPUOverheadPct, 100*r.MachineBusy,
			r.TrackedPerSOn, r.PollsPerSOn, r.PollsPerSOff, r.Probe.ResolutionMs, r.Probe.IntervalP99Ms, r.Probe.LagMs.Count, r.Probe.Tracked, r.Probe.LagMs.P50, r.Probe.LagMs.P99)
	}
	b.addLagAll(t, runs, alone)
	return nil
}

// slicedPositions is a user's position journal that follows nothing in
// off slices.
type slicedPositions struct {
	driver.PositionJournal
	s        slicer
	followed *[lagSlices]atomic.Int64
}

func (j slicedPositions) Next() bool {
	k := j.s.at(clock.Now())
	if k >= 0 && !j.s.on(k) {
		return false
	}
	if k >= 0 {
		j.followed[k].Add(1)
	}
	return j.PositionJournal.Next()
}

// lagAllRun resets the database to the same state, then runs once, its
// slices alternating every transaction followed and none.
func (b *bench) lagAllRun(ctx context.Context, p *pgLab, t lagTarget, rep int) (lagRun, error) {
	run := lagRun{Variant: "all", Rep: rep}
	probe := lagprobe.New(lagprobe.Config{Writers: lagUsers, Interval: lagInterval})
	if err := p.exec(ctx, "db", t.prep...); err != nil {
		return run, err
	}
	if err := p.cluster.WaitFlowing(ctx); err != nil {
		return run, err
	}
	stopWatch, err := watchPositions(ctx, p, probe)
	if err != nil {
		return run, err
	}
	defer stopWatch()
	db, err := p.sql().Open(ctx, "db", "db")
	if err != nil {
		return run, err
	}
	defer db.Close()
	db.SetMaxOpenConns(lagUsers + 2)
	cfg := p.driverConfig(driver.Config{Users: lagUsers, Warmup: lagWarmup, Duration: lagMeasure, Seed: int64(rep), MaxRetries: 3})
	cfg.Positions, _ = p.cluster.(engine.SessionPositions)
	var followed [lagSlices]atomic.Int64
	out, err := b.slicedRun(ctx, sliced{p: p, db: db, cfg: cfg, tx: t.tx, flip: rep%2 == 0, counted: &followed,
		install: func(sl slicer, cfg *driver.Config) {
			cfg.LagPositions = func(i int) driver.PositionJournal {
				return slicedPositions{probe.PosWriter(i), sl, &followed}
			}
		},
		cumulative: func() int64 { return probe.Results()["sb"].Polls }})
	run.Quiet = out.quiet
	if err != nil {
		return run, err
	}
	fillLagRun(&run, out)
	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	err = probe.WaitCaughtUp(cctx)
	ccancel()
	if err != nil {
		return run, err
	}
	if err := stopWatch(); err != nil {
		return run, fmt.Errorf("position watcher: %w", err)
	}
	r, ok := probe.Results()["sb"]
	if !ok {
		return run, errors.New("lag probe: no result for the standby")
	}
	r.Series, r.Histogram = nil, nil
	run.Probe = &r
	run.SampleEvery = 1
	return run, nil
}

// fillLagRun sets run's figures from a sliced run's.
func fillLagRun(run *lagRun, out slicedOut) {
	res, on, off := out.res, out.on, out.off
	run.Slices, run.MachineBusy = out.slices, out.busy
	run.TPS, run.Transactions, run.Errors = benchkit.Round(res.TPS, 1), res.Transactions, res.Errors
	run.LatencyMeanMs, run.LatencyP99Ms = benchkit.Round(res.CommitLatency.Mean, 3), benchkit.Round(res.CommitLatency.P99, 3)
	run.TPSOn, run.TPSOff = benchkit.Round(float64(on.Commits)/on.Seconds, 1), benchkit.Round(float64(off.Commits)/off.Seconds, 1)
	run.OverheadPct = benchkit.Round(100*(1-run.TPSOn/run.TPSOff), 2)
	run.BenchCPUOnUs, run.BenchCPUOffUs = perTxUs(on.BenchCPUS, on.Commits), perTxUs(off.BenchCPUS, off.Commits)
	run.PrimaryOnUs, run.PrimaryOffUs = perTxUs(on.PrimaryCPUS, on.Commits), perTxUs(off.PrimaryCPUS, off.Commits)
	run.StandbyOnUs, run.StandbyOffUs = perTxUs(on.StandbyCPUS, on.Commits), perTxUs(off.StandbyCPUS, off.Commits)
	cpuOn, cpuOff := run.BenchCPUOnUs+run.PrimaryOnUs+run.StandbyOnUs, run.BenchCPUOffUs+run.PrimaryOffUs+run.StandbyOffUs
	run.CPUOverheadPct = benchkit.Round(100*(1-cpuOff/cpuOn), 2)
	run.PollsPerSOn, run.PollsPerSOff = benchkit.Round(float64(on.Polls)/on.Seconds, 1), benchkit.Round(float64(off.Polls)/off.Seconds, 1)
	run.TrackedPerSOn = benchkit.Round(float64(on.Tracked)/on.Seconds, 1)
}

// watchPositions starts probe's position watcher at node sb, as replab
// run does, and waits for its first poll. stop ends it and says why it
// ended; it may be called more than once.
func watchPositions(ctx context.Context, p *pgLab, probe *lagprobe.Probe) (stop func() error, err error) {
	pr, err := p.cluster.(engine.Positions).PositionReader(ctx, "sb")
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- probe.WatchPositions(wctx, "sb", pr, lagprobe.WatchOptions{}) }()
	var once sync.Once
	var werr error
	stop = func() error {
		once.Do(func() {
			cancel()
			werr = <-done
			pr.Close()
		})
		return werr
	}
	if err := probe.WaitWatching(ctx, "sb"); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// positionWatcherAlone measures the idle cost, then the position watcher
// polling the idle standby every interval (a COMMIT kept in flight so that
// it never waits).
func (b *bench) positionWatcherAlone(ctx context.Context, p *pgLab) (watcherCost, error) {
	return measureWatcher(ctx, p, func() (*lagprobe.Probe, func() error, error) {
		probe := lagprobe.New(lagprobe.Config{Writers: 1, Interval: lagInterval})
		stop, err := watchPositions(ctx, p, probe)
		if err == nil {
			probe.PosWriter(0).Sending(probe.Now()) // in flight for the whole measurement
		}
		return probe, stop, err
	})
}

func (b *bench) addLagAll(t lagTarget, runs []lagRun, alone watcherCost) {
	per := map[string][]float64{}
	for _, r := range runs {
		add := func(k string, v float64) { per[k] = append(per[k], v) }
		add("overhead_pct", r.OverheadPct)
		add("cpu_overhead_pct", r.CPUOverheadPct)
		add("tps_on", r.TPSOn)
		add("tps_off", r.TPSOff)
		add("cpu_on_us_per_tx", r.BenchCPUOnUs+r.PrimaryOnUs+r.StandbyOnUs)
		add("cpu_off_us_per_tx", r.BenchCPUOffUs+r.PrimaryOffUs+r.StandbyOffUs)
		add("bench_process_cpu_on_us_per_tx", r.BenchCPUOnUs)
		add("bench_process_cpu_off_us_per_tx", r.BenchCPUOffUs)
		add("primary_cpu_on_us_per_tx", r.PrimaryOnUs)
		add("primary_cpu_off_us_per_tx", r.PrimaryOffUs)
		add("standby_cpu_on_us_per_tx", r.StandbyOnUs)
		add("standby_cpu_off_us_per_tx", r.StandbyOffUs)
		add("polls_per_s_on", r.PollsPerSOn)
		add("polls_per_s_off", r.PollsPerSOff)
		add("followed_per_s_on", r.TrackedPerSOn)
		add("machine_busy_fraction", r.MachineBusy)
		add("resolution_ms", r.Probe.ResolutionMs)
		add("interval_p99_ms", r.Probe.IntervalP99Ms)
		add("poll_p50_ms", r.Probe.PollP50Ms)
		add("poll_p99_ms", r.Probe.PollP99Ms)
		add("lag_p50_ms", r.Probe.LagMs.P50)
		add("lag_p99_ms", r.Probe.LagMs.P99)
		timed := 0.0
		if r.Probe.Tracked > 0 {
			timed = float64(r.Probe.LagMs.Count) / float64(r.Probe.Tracked)
		}
		add("timed_fraction", timed)
	}
	mean := func(k string) float64 { return spreadOf(per[k], 3).Mean }
	stat := map[string]any{}
	for k, xs := range per {
		stat[k] = spreadOf(xs, 3)
	}
	cfg := map[string]any{
		"users": lagUsers, "link": fmt.Sprintf("db <-> sb, %s each way, 1gbit", lagDelay), "interval_ms": float64(lagInterval) / 1e6,
		"transaction": t.txText, "client_site": "db", "scheme": t.scheme,
		"warmup_s": lagWarmup.Seconds(), "measure_s": lagMeasure.Seconds(), "repetitions": lagAllReps,
		"slices":  fmt.Sprintf("%d of %s from %s into the measure phase: on, off, off, on, … in odd runs, off, on, on, off, … in even ones", lagSlices, lagSlice, lagLead),
		"variant": `on: every writing transaction followed by position (replab run's default, lag_sample = "all": its commit position read in the same write as its COMMIT, the position watcher polling the standby's applied position every 1 ms while a commit is in flight or unseen); off: nothing followed (the watcher idle, its connection open)`,
		"order":   fmt.Sprintf("%d runs; %s before each, replica caught up", lagAllReps, joinPrep(t.prep)),
	}
	o := spreadOf(per["overhead_pct"], 2)
	ci := stats.MeanCI(per["overhead_pct"], 0.95).HalfWidth
	cpuS := spreadOf(per["cpu_overhead_pct"], 2)
	logf("      all: %.2f %% ± %.2f (95 %% CI) of throughput (sd %.2f, %.2f to %.2f), %.2f %% of CPU per transaction", o.Mean, ci, o.SD, o.Min, o.Max, cpuS.Mean)
	b.r.Add(Figure{
		Name: t.prefix + "lag_all_overhead_pct", Value: o.Mean, Configured: cfg,
		Target: "<= 3 %", TargetMax: benchkit.Ptr(3.0),
		Note: fmt.Sprintf("every transaction's lag by position (lag_sample = \"all\"): mean over %d runs of 1 − TPS in the run's on slices / TPS in its off slices, in %%: %.2f ± %.2f (sd, 95%% CI ± %.2f), from %.2f to %.2f; from CPU per transaction (this process + primary + replica, on vs off slices) %.2f ± %.2f (sd)",
			len(per["overhead_pct"]), o.Mean, o.SD, benchkit.Round(ci, 2), o.Min, o.Max, cpuS.Mean, cpuS.SD),
		Details: map[string]any{"per_run_pct": per["overhead_pct"], "per_run": o, "stats": stat, "runs": runs,
			"cpu_estimate_pct": cpuS.Mean, "cpu_per_run_pct": per["cpu_overhead_pct"], "watcher_alone": alone},
	})
	// A model from the parts: polls at what one costs with no workload,
	// and followed transactions at their extra CPU (on less off per
	// transaction, less the polls' share), as a share of the cores.
	perPollUs := 0.0
	if alone.PollsPerS > 0 {
		perPollUs = (alone.BenchCores + alone.StandbyCores) * 1e6 / alone.PollsPerS
	}
	txUs := 0.0
	if tps := mean("tps_on"); tps > 0 {
		txUs = max(mean("cpu_on_us_per_tx")-mean("cpu_off_us_per_tx")-mean("polls_per_s_on")*perPollUs/tps, 0)
	}
	cores := float64(runtime.NumCPU())
	model := (mean("polls_per_s_on")*perPollUs + mean("followed_per_s_on")*txUs) / (cores * 1e6) * 100
	b.r.Add(Figure{
		Name: t.prefix + "lag_all_overhead_model_pct", Value: benchkit.Round(model, 2), Configured: cfg,
		Target: "<= 3 %", TargetMax: benchkit.Ptr(3.0),
		Note: fmt.Sprintf("CPU the position method takes, as a share of the %.0f cores: %.1f polls/s × %.1f µs per poll (the watcher alone, this process + replica) + %.1f followed transactions/s × %.1f µs each (the on slices' extra CPU per transaction less its polls); leaves out interference",
			cores, mean("polls_per_s_on"), perPollUs, mean("followed_per_s_on"), txUs),
		Details: map[string]any{"cpu_per_poll_us": benchkit.Round(perPollUs, 1), "cpu_per_followed_transaction_us": benchkit.Round(txUs, 1), "cores": cores},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_all_resolution_ms", Value: spreadOf(per["resolution_ms"], 4).Mean, Configured: cfg, Expected: benchkit.Ptr(float64(lagInterval) / 1e6),
		Target: "<= 1.1 ms", TargetMax: benchkit.Ptr(1.1),
		Note: "lagprobe Result.ResolutionMs of the position watcher over each run: the achieved mean interval between consecutive poll starts (configured 1 ms); a lag is late by at most one interval plus one poll",
		Details: map[string]any{"resolution_ms": stat["resolution_ms"], "interval_p99_ms": stat["interval_p99_ms"], "poll_p50_ms": stat["poll_p50_ms"],
			"poll_p99_ms": stat["poll_p99_ms"], "polls_per_s_on": stat["polls_per_s_on"], "polls_per_s_off": stat["polls_per_s_off"]},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_all_timed_fraction", Value: spreadOf(per["timed_fraction"], 6).Mean, Configured: cfg, Expected: benchkit.Ptr(1.0),
		Target: "1 (every followed transaction timed)", TargetMin: benchkit.Ptr(1.0),
		Note:    "lagprobe Result: measured transactions timed (LagMs.Count) / measured transactions followed and committed (Tracked), after the replica caught up; the off slices follow none",
		Details: map[string]any{"timed_fraction": stat["timed_fraction"], "followed_per_s_on": stat["followed_per_s_on"], "lag_p50_ms": stat["lag_p50_ms"], "lag_p99_ms": stat["lag_p99_ms"]},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_all_watcher_cpu_cores", Value: benchkit.Round(alone.BenchCores+alone.StandbyCores, 3), Configured: cfg,
		Note: fmt.Sprintf("the position watcher polling the idle replica every 1 ms without pause, no workload, %s: CPU above idle of this process (%.3f cores, %.1f µs per poll) plus the replica's (%.3f cores, %.1f µs per poll)",
			watcherAloneFor, alone.BenchCores, alone.BenchUsPerPoll, alone.StandbyCores, alone.StandbyUsPerPoll),
		Details: map[string]any{"watcher_alone": alone},
	})
}

func joinPrep(prep []string) string {
	s := ""
	for i, q := range prep {
		if i > 0 {
			s += " + "
		}
		s += q
	}
	return s
}
