package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/lagprobe"
	"replab/internal/stats"
	"replab/internal/workload"
)

// The lag probe's cost: the same closed-loop run with the probe off, as
// replab runs it by default (the automatic sample, lag_sample = "auto",
// and a watcher at the standby polling while a tracked transaction may
// have become visible), and tracking every transaction (lag_sample = 1).
const (
	lagUsers    = 8
	lagWarmup   = time.Second
	lagMeasure  = 8 * time.Second
	lagReps     = 12 // off/auto pairs
	lagEveryRep = 3  // repetitions that also run every
	lagInterval = lagprobe.DefaultInterval
	lagDelay    = "10ms"
)

const (
	variantOff   = "off"   // no probe
	variantAuto  = "auto"  // the default: automatic sample, adaptive watcher
	variantEvery = "every" // every transaction tracked, adaptive watcher
)

var lagVariants = []string{variantOff, variantAuto, variantEvery}

// lagOrder alternates which of off and auto goes first; the first
// lagEveryRep repetitions also run every, in turn first, middle and last.
// The headline is the off/auto difference, so most of the time goes to
// their pairs: the machine drifts by several per cent over minutes.
func lagOrder(rep int) []string {
	out := []string{variantOff, variantAuto}
	if rep%2 == 1 {
		out[0], out[1] = out[1], out[0]
	}
	if rep < lagEveryRep {
		out = append(out[:rep%3], append([]string{variantEvery}, out[rep%3:]...)...)
	}
	return out
}

// lagRun is one run of one variant.
type lagRun struct {
	Variant       string  `json:"variant"`
	Rep           int     `json:"rep"`
	TPS           float64 `json:"tps"`
	Transactions  int64   `json:"transactions"` // measure phase
	Errors        int64   `json:"errors"`
	LatencyMeanMs float64 `json:"latency_mean_ms"`
	LatencyP99Ms  float64 `json:"latency_p99_ms"`
	// CPU over the measure phase, per transaction committed in it and in
	// cores: this process (driver, watcher, link emulator carrying the
	// WAL stream), the primary, the standby.
	BenchCPUUsPerTx   float64            `json:"bench_process_cpu_us_per_tx"`
	PrimaryCPUUsPerTx float64            `json:"primary_cpu_us_per_tx"`
	StandbyCPUUsPerTx float64            `json:"standby_cpu_us_per_tx"`
	BenchCores        float64            `json:"bench_process_cores"`
	PrimaryCores      float64            `json:"primary_cores"`
	StandbyCores      float64            `json:"standby_cores"`
	MachineBusy       float64            `json:"machine_busy_fraction"`
	UnrelatedCores    float64            `json:"unrelated_cores"` // the rest of the machine, in cores
	Quiet             benchkit.QuietWait `json:"wait_for_quiet_machine"`
	// Probe is the watcher's view, SampleEvery the N the driver used
	// (every Nth transaction of each user tracked), TrackedPerS the
	// tracked transactions per measured second, PollsPerS the watcher's
	// polls per second of the measure phase.
	Probe       *lagprobe.Result `json:"probe,omitempty"`
	SampleEvery int              `json:"sample_every,omitempty"`
	TrackedPerS float64          `json:"tracked_per_s,omitempty"`
	PollsPerS   float64          `json:"polls_per_s,omitempty"`
}

// lagTarget is the system the lag step measures the probe on: a
// primary db and a replica sb lagDelay apart, a table of accounts, and a
// single-row UPDATE by key as the transaction.
type lagTarget struct {
	prefix  string // of every figure's name: "" (PostgreSQL) or "mariadb_"
	lab     string
	engine  engine.Engine
	dialect string
	nodes   string // the spec's [engine], nodes and [scheme]
	scheme  string // described in the figures
	tx      workload.TxType
	txText  string
	// load fills the accounts at db; prep runs there before each run.
	load func(ctx context.Context, b *bench, p *pgLab) error
	prep []string
}

func (b *bench) lagOverhead(ctx context.Context) error { return b.lagOverheadOn(ctx, postgresLag) }

// postgresLag is pgbench's accounts at scale 10, physical streaming.
var postgresLag = lagTarget{
	lab: "bench-lagprobe", engine: postgres.Engine{}, dialect: "postgres",
	nodes: `
[engine]
kind = "postgres"

[node.db]
site = "db"
role = "primary"

[node.sb]
site = "sb"
role = "standby"
from = "db"
`,
	scheme: "async physical streaming, primary db, standby sb",
	tx:     updateTx(),
	txText: "BEGIN; UPDATE pgbench_accounts … WHERE aid = uniform(1, 1000000); [UPDATE replab_lag SET seq = $1 WHERE writer = $2;] COMMIT, pipelined",
	load:   func(ctx context.Context, b *bench, p *pgLab) error { return b.loadPgbench(ctx, p, "db") },
	prep:   []string{"VACUUM pgbench_accounts", "VACUUM " + engine.LagTableName, "CHECKPOINT"},
}

func (b *bench) lagOverheadOn(ctx context.Context, t lagTarget) error {
	body := fmt.Sprintf(`
[site.db]
[site.sb]
[[link]]
sites = ["db", "sb"]
delay = %q
rate = "1gbit"
%s`, lagDelay, t.nodes)
	p, err := upLab(ctx, t.engine, t.lab, body)
	if err != nil {
		return err
	}
	defer p.close()
	t0 := time.Now()
	if err := t.load(ctx, b, p); err != nil {
		return err
	}
	if err := p.sql().ApplySchema(ctx, engine.Schema{Tables: []engine.Table{engine.LagTable()}}); err != nil {
		return err
	}
	if err := p.cluster.WaitFlowing(ctx); err != nil {
		return err
	}
	logf("      %d accounts and replab_lag at the primary, at the replica too, in %.1f s", compareAccounts, time.Since(t0).Seconds())

	if _, err := benchkit.WaitQuiet(ctx, quiet); err != nil {
		return err
	}
	alone, err := b.watcherAlone(ctx, p)
	if err != nil {
		return fmt.Errorf("watcher alone: %w", err)
	}
	logf("      watcher alone (no workload): %.0f polls/s, every %.3f ms (p99 %.3f), poll p50 %.3f p99 %.3f ms; CPU %.1f µs/poll here (%.3f cores), %.1f µs/poll at the standby (%.3f cores)",
		alone.PollsPerS, alone.ResolutionMs, alone.IntervalP99Ms, alone.PollP50Ms, alone.PollP99Ms, alone.BenchUsPerPoll, alone.BenchCores, alone.StandbyUsPerPoll, alone.StandbyCores)

	var runs []lagRun
	for rep := range lagReps {
		for _, v := range lagOrder(rep) {
			r, err := b.lagRun(ctx, p, t, v, rep+1)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", v, rep+1, err)
			}
			runs = append(runs, r)
			line := fmt.Sprintf("      %-9s run %d: %7.0f tps, latency %.3f ms; CPU µs/tx: bench %.1f, primary %.1f, standby %.1f; machine busy %.0f%%, unrelated %.2f cores",
				v, rep+1, r.TPS, r.LatencyMeanMs, r.BenchCPUUsPerTx, r.PrimaryCPUUsPerTx, r.StandbyCPUUsPerTx, 100*r.MachineBusy, r.UnrelatedCores)
			if r.Probe != nil {
				line += fmt.Sprintf("; every %d tracked (%.0f/s), %.0f polls/s every %.3f ms (p99 %.3f) from %.1f ms after COMMIT, %d window hits, poll p99 %.3f ms, lag p50 %.1f ms",
					r.SampleEvery, r.TrackedPerS, r.PollsPerS, r.Probe.ResolutionMs, r.Probe.IntervalP99Ms, r.Probe.FloorMs, r.Probe.WindowHits, r.Probe.PollP99Ms, r.Probe.LagMs.P50)
			}
			logf("%s", line)
		}
	}
	b.addLag(t, runs, alone)
	return nil
}

// lagRun resets the database to the same state, then runs one variant.
func (b *bench) lagRun(ctx context.Context, p *pgLab, t lagTarget, variant string, rep int) (lagRun, error) {
	probe := lagprobe.New(lagprobe.Config{Writers: lagUsers, Interval: lagInterval})
	seed, err := engine.LagSeedSQL(t.dialect, lagUsers)
	if err != nil {
		return lagRun{}, err
	}
	if err := p.exec(ctx, "db", append(seed, t.prep...)...); err != nil {
		return lagRun{}, err
	}
	// The replica has applied everything (the previous run included).
	if err := p.cluster.WaitFlowing(ctx); err != nil {
		return lagRun{}, err
	}
	run := lagRun{Variant: variant, Rep: rep}
	stopWatch := func() error { return nil }
	if variant != variantOff {
		q, err := p.lagReader(ctx, "sb")
		if err != nil {
			return run, err
		}
		defer q.Close()
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- probe.Watch(wctx, "sb", q) }()
		stopped := false
		stopWatch = func() error {
			if stopped {
				return nil
			}
			stopped = true
			cancel()
			return <-done
		}
		defer stopWatch()
		if err := probe.WaitWatching(ctx, "sb"); err != nil {
			return run, err
		}
	}
	db, err := p.sql().Open(ctx, "db", "db")
	if err != nil {
		return run, err
	}
	defer db.Close()
	db.SetMaxOpenConns(lagUsers + 2)
	if run.Quiet, err = benchkit.WaitQuiet(ctx, quiet); err != nil {
		return run, err
	}
	cfg := p.driverConfig(driver.Config{Users: lagUsers, Warmup: lagWarmup, Duration: lagMeasure, Seed: int64(rep), MaxRetries: 3})
	if variant != variantOff {
		cfg.Lag = func(i int) driver.LagJournal { return probe.Writer(i) }
		if cfg.LagStatement, err = engine.LagUpdateSQL(t.dialect); err != nil {
			return run, err
		}
		cfg.LagEvery = 0 // automatic, as replab run by default
		if variant == variantEvery {
			cfg.LagEvery = 1
		}
	}
	// CPU is read from the end of the warmup, as TPS is: the automatic
	// sample's warmup tracks every transaction in its first half, which
	// the measure phase does not pay for. driver.Run starts its clock a
	// few ms after this timer's, so the window holds at most those ms of
	// warmup.
	type cpuAt struct {
		self, pri, sb float64
		meter         benchkit.CPUMeter
		t             time.Time
		polls         int64 // the watcher's so far
	}
	measureCPU := make(chan cpuAt, 1)
	timer := time.AfterFunc(lagWarmup, func() {
		measureCPU <- cpuAt{benchkit.SelfCPU(), nodeCPU(ctx, p.cluster, "db"), nodeCPU(ctx, p.cluster, "sb"), benchkit.StartCPU(), time.Now(), probe.Results()["sb"].Polls}
	})
	defer timer.Stop()
	res, err := driver.Run(ctx, cfg, []workload.TxType{t.tx}, driver.Sources(db))
	if err != nil {
		return run, err
	}
	if !res.Complete {
		return run, fmt.Errorf("driver: %s", res.StopReason)
	}
	var c0 cpuAt
	select {
	case c0 = <-measureCPU:
	default:
		return run, errors.New("the driver ended before its warmup did")
	}
	wall := time.Since(c0.t).Seconds()
	self, pri, sb, cpu := benchkit.SelfCPU()-c0.self, nodeCPU(ctx, p.cluster, "db")-c0.pri, nodeCPU(ctx, p.cluster, "sb")-c0.sb, c0.meter.Read()
	all := res.Transactions
	run.TPS, run.Transactions, run.Errors = benchkit.Round(res.TPS, 1), res.Transactions, res.Errors
	run.LatencyMeanMs, run.LatencyP99Ms = benchkit.Round(res.CommitLatency.Mean, 3), benchkit.Round(res.CommitLatency.P99, 3)
	run.BenchCPUUsPerTx, run.PrimaryCPUUsPerTx, run.StandbyCPUUsPerTx = perTxUs(self, all), perTxUs(pri, all), perTxUs(sb, all)
	run.BenchCores, run.PrimaryCores, run.StandbyCores = benchkit.Round(self/wall, 3), benchkit.Round(pri/wall, 3), benchkit.Round(sb/wall, 3)
	run.MachineBusy = cpu.MachineBusy
	run.UnrelatedCores = unrelated(cpu, self, pri+sb, wall)
	if variant != variantOff {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := probe.WaitCaughtUp(cctx)
		cancel()
		if err != nil {
			return run, err
		}
		if err := stopWatch(); err != nil {
			return run, fmt.Errorf("lag watcher: %w", err)
		}
		r, ok := probe.Results()["sb"]
		if !ok {
			return run, errors.New("lag probe: no result for the standby")
		}
		r.Series, r.Histogram = nil, nil // too long for the JSON; the summary stays
		run.Probe = &r
		run.SampleEvery = res.LagSampleEvery
		run.TrackedPerS = benchkit.Round(float64(r.Tracked)/res.MeasureSeconds, 1)
		run.PollsPerS = benchkit.Round(float64(r.Polls-c0.polls)/wall, 1) // the measure phase's
	}
	return run, nil
}

// spread is mean, sample standard deviation, min and max.
type spread struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func spreadOf(xs []float64, decimals int) spread {
	if len(xs) == 0 {
		return spread{}
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	m := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	sd := 0.0
	if len(xs) > 1 {
		sd = math.Sqrt(ss / float64(len(xs)-1))
	}
	return spread{Mean: benchkit.Round(m, decimals), SD: benchkit.Round(sd, decimals), Min: benchkit.Round(slices.Min(xs), decimals), Max: benchkit.Round(slices.Max(xs), decimals)}
}

func (b *bench) addLag(t lagTarget, runs []lagRun, alone watcherCost) {
	byVariant := map[string]map[int]lagRun{}
	for _, r := range runs {
		if byVariant[r.Variant] == nil {
			byVariant[r.Variant] = map[int]lagRun{}
		}
		byVariant[r.Variant][r.Rep] = r
	}
	tps := map[string][]float64{}
	pct := map[string][]float64{} // per repetition, vs off in the same repetition
	probeStat := map[string]map[string][]float64{variantAuto: {}, variantEvery: {}}
	for rep := 1; rep <= lagReps; rep++ {
		off := byVariant[variantOff][rep]
		for _, v := range lagVariants {
			r, ok := byVariant[v][rep]
			if !ok {
				continue
			}
			tps[v] = append(tps[v], r.TPS)
			if v == variantOff {
				continue
			}
			// Paired within a repetition (runs next to each other in time).
			pct[v] = append(pct[v], 100*(off.TPS-r.TPS)/off.TPS)
			if r.Probe != nil {
				ps := probeStat[v]
				ps["resolution_ms"] = append(ps["resolution_ms"], r.Probe.ResolutionMs)
				ps["interval_p99_ms"] = append(ps["interval_p99_ms"], r.Probe.IntervalP99Ms)
				ps["poll_p50_ms"] = append(ps["poll_p50_ms"], r.Probe.PollP50Ms)
				ps["poll_p99_ms"] = append(ps["poll_p99_ms"], r.Probe.PollP99Ms)
				ps["polls_per_s"] = append(ps["polls_per_s"], r.PollsPerS)
				ps["tracked_per_s"] = append(ps["tracked_per_s"], r.TrackedPerS)
				ps["sample_every"] = append(ps["sample_every"], float64(r.SampleEvery))
				ps["floor_ms"] = append(ps["floor_ms"], r.Probe.FloorMs)
				ps["window_hits"] = append(ps["window_hits"], float64(r.Probe.WindowHits))
				ps["lag_p50_ms"] = append(ps["lag_p50_ms"], r.Probe.LagMs.P50)
				ps["lag_p99_ms"] = append(ps["lag_p99_ms"], r.Probe.LagMs.P99)
			}
		}
	}
	mean := func(v string) float64 { return spreadOf(tps[v], 1).Mean }
	cpuMean := func(v string, f func(lagRun) float64) float64 {
		var xs []float64
		for _, r := range byVariant[v] {
			xs = append(xs, f(r))
		}
		return spreadOf(xs, 2).Mean
	}
	// On a machine the run saturates, throughput follows the CPU each
	// transaction costs everywhere (this process, primary, standby): a
	// second estimate of the overhead, less sensitive to other work.
	totalCPU := map[string]float64{}
	for _, v := range lagVariants {
		totalCPU[v] = cpuMean(v, func(r lagRun) float64 { return r.BenchCPUUsPerTx + r.PrimaryCPUUsPerTx + r.StandbyCPUUsPerTx })
	}
	cpuOverhead := func(v string) float64 { return benchkit.Round(100*(1-totalCPU[variantOff]/totalCPU[v]), 2) }
	perVariant := map[string]any{}
	for _, v := range lagVariants {
		m := map[string]any{
			"tps":                         spreadOf(tps[v], 1),
			"bench_process_cpu_us_per_tx": cpuMean(v, func(r lagRun) float64 { return r.BenchCPUUsPerTx }),
			"primary_cpu_us_per_tx":       cpuMean(v, func(r lagRun) float64 { return r.PrimaryCPUUsPerTx }),
			"standby_cpu_us_per_tx":       cpuMean(v, func(r lagRun) float64 { return r.StandbyCPUUsPerTx }),
			"bench_process_cores":         cpuMean(v, func(r lagRun) float64 { return r.BenchCores }),
			"standby_cores":               cpuMean(v, func(r lagRun) float64 { return r.StandbyCores }),
			"machine_busy_fraction":       cpuMean(v, func(r lagRun) float64 { return r.MachineBusy }),
			"latency_mean_ms":             cpuMean(v, func(r lagRun) float64 { return r.LatencyMeanMs }),
		}
		for k, xs := range probeStat[v] {
			m[k] = spreadOf(xs, 3)
		}
		perVariant[v] = m
	}
	cfg := map[string]any{
		"users": lagUsers, "link": fmt.Sprintf("db <-> sb, %s each way, 1gbit", lagDelay), "interval_ms": float64(lagInterval) / 1e6,
		"transaction": t.txText, "client_site": "db", "scheme": t.scheme,
		"warmup_s": lagWarmup.Seconds(), "measure_s": lagMeasure.Seconds(), "repetitions": lagReps,
		"variants": "off (no probe); auto (replab's default: lag_sample = \"auto\", at most " + fmt.Sprint(driver.DefaultLagBudget) + " tracked/s, adaptive watcher); every (lag_sample = 1, adaptive watcher)",
		"order":    fmt.Sprintf("%d repetitions of off and auto, alternating which runs first; the first %d also run every (first, second, last); %s replica caught up before each", lagReps, lagEveryRep, strings.Join(append(t.prep, ""), " + ")),
	}
	logf("      total CPU per transaction (this process + primary + standby): off %.1f µs, auto %.1f µs, every %.1f µs: %.1f %% and %.1f %% of throughput on a saturated machine",
		totalCPU[variantOff], totalCPU[variantAuto], totalCPU[variantEvery], cpuOverhead(variantAuto), cpuOverhead(variantEvery))
	autoS, everyS := spreadOf(pct[variantAuto], 2), spreadOf(pct[variantEvery], 2)
	b.r.Add(Figure{
		Name: t.prefix + "lag_overhead_pct", Value: autoS.Mean, Configured: cfg,
		Target: "<= 3 %", TargetMax: benchkit.Ptr(3.0),
		Note: fmt.Sprintf("replab's default probe (automatic sample, adaptive watcher): mean over %d adjacent pairs of 1 − TPS with it / TPS without, in %%: %.2f ± %.2f (sd, 95%% CI ± %.2f), from %.2f to %.2f; ratio of the means %.2f",
			len(pct[variantAuto]), autoS.Mean, autoS.SD, benchkit.Round(stats.MeanCI(pct[variantAuto], 0.95).HalfWidth, 2), autoS.Min, autoS.Max, benchkit.Round(100*(1-mean(variantAuto)/mean(variantOff)), 2)),
		Details: map[string]any{"per_repetition_pct": pct[variantAuto], "per_repetition": autoS, "variants": perVariant, "runs": runs,
			"cpu_estimate_pct": cpuOverhead(variantAuto)},
	})
	// A model less exposed to the machine's drift: the CPU the default
	// probe takes, from what a poll costs on the idle machine (the watcher
	// alone) and what a tracked transaction's statement costs (every's
	// extra CPU per transaction, less its polls' share), at the auto runs'
	// polls and tracked transactions per second, as a share of the
	// machine's cores. It leaves out interference (caches, scheduling).
	perPollUs := 0.0
	if alone.PollsPerS > 0 {
		perPollUs = (alone.BenchCores + alone.StandbyCores) * 1e6 / alone.PollsPerS
	}
	mstat := func(v, k string) float64 { return spreadOf(probeStat[v][k], 3).Mean }
	everyTPS := mean(variantEvery)
	stmtUs := 0.0
	if everyTPS > 0 {
		stmtUs = max(totalCPU[variantEvery]-totalCPU[variantOff]-mstat(variantEvery, "polls_per_s")*perPollUs/everyTPS, 0)
	}
	cores := float64(runtime.NumCPU())
	modelPct := (mstat(variantAuto, "polls_per_s")*perPollUs + mstat(variantAuto, "tracked_per_s")*stmtUs) / (cores * 1e6) * 100
	b.r.Add(Figure{
		Name: t.prefix + "lag_overhead_model_pct", Value: benchkit.Round(modelPct, 2), Configured: cfg,
		Target: "<= 3 %", TargetMax: benchkit.Ptr(3.0),
		Note: fmt.Sprintf("CPU the default probe takes, as a share of the %.0f cores: %.1f polls/s × %.1f µs per poll (the watcher alone, this process + standby) + %.1f tracked/s × %.1f µs per tracked statement (every's extra CPU per transaction less its polls); leaves out interference",
			cores, mstat(variantAuto, "polls_per_s"), perPollUs, mstat(variantAuto, "tracked_per_s"), stmtUs),
		Details: map[string]any{"cpu_per_poll_us": benchkit.Round(perPollUs, 1), "cpu_per_tracked_statement_us": benchkit.Round(stmtUs, 1),
			"polls_per_s": mstat(variantAuto, "polls_per_s"), "tracked_per_s": mstat(variantAuto, "tracked_per_s"), "cores": cores},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_every_overhead_pct", Value: everyS.Mean, Configured: cfg,
		Note:    fmt.Sprintf("every transaction tracked (lag_sample = 1): mean over %d repetitions of 1 − TPS(every) / TPS(off) in the same repetition: %.2f ± %.2f (sd)", len(pct[variantEvery]), everyS.Mean, everyS.SD),
		Details: map[string]any{"per_repetition_pct": pct[variantEvery], "per_repetition": everyS, "cpu_estimate_pct": cpuOverhead(variantEvery)},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_watcher_cpu_cores", Value: benchkit.Round(alone.BenchCores+alone.StandbyCores, 3), Configured: cfg,
		Note: fmt.Sprintf("one watcher polling the idle standby every 1 ms without pause (PollAlways), no workload, %s: CPU above idle of this process (%.3f cores, %.1f µs per poll) plus the standby's (%.3f cores, %.1f µs per poll) — what adaptive polling avoids",
			watcherAloneFor, alone.BenchCores, alone.BenchUsPerPoll, alone.StandbyCores, alone.StandbyUsPerPoll),
		Details: map[string]any{"watcher_alone": alone},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_resolution_idle_ms", Value: alone.ResolutionMs, Configured: cfg, Expected: benchkit.Ptr(float64(lagInterval) / 1e6),
		Note: fmt.Sprintf("lagprobe ResolutionMs polling without pause and no workload (machine otherwise as busy as it was); interval p99 %.3f ms, poll p50 %.3f ms, poll p99 %.3f ms",
			alone.IntervalP99Ms, alone.PollP50Ms, alone.PollP99Ms),
	})
	if ps := probeStat[variantAuto]; len(ps["resolution_ms"]) > 0 {
		res := spreadOf(ps["resolution_ms"], 4)
		b.r.Add(Figure{
			Name: t.prefix + "lag_resolution_ms", Value: res.Mean, Configured: cfg, Expected: benchkit.Ptr(float64(lagInterval) / 1e6),
			Target: "<= 1 ms (configured interval)",
			Note:   "lagprobe Result.ResolutionMs of the default probe's runs: the achieved mean interval between consecutive poll starts (configured 1 ms); details has the interval p99, poll durations, polls/s, the floor and window hits",
			Details: map[string]any{"resolution_ms": res, "interval_p99_ms": spreadOf(ps["interval_p99_ms"], 4),
				"poll_p50_ms": spreadOf(ps["poll_p50_ms"], 4), "poll_p99_ms": spreadOf(ps["poll_p99_ms"], 4),
				"polls_per_s": spreadOf(ps["polls_per_s"], 1), "floor_ms": spreadOf(ps["floor_ms"], 3), "window_hits": spreadOf(ps["window_hits"], 1)},
		})
		b.r.Add(Figure{
			Name: t.prefix + "lag_tracked_per_s", Value: spreadOf(ps["tracked_per_s"], 1).Mean, Configured: cfg,
			Note:    fmt.Sprintf("transactions tracked per measured second by the default probe: every %.0f-th of each user (mean N)", spreadOf(ps["sample_every"], 1).Mean),
			Details: map[string]any{"sample_every": spreadOf(ps["sample_every"], 1)},
		})
		b.r.Add(Figure{
			Name: t.prefix + "lag_poll_p99_ms", Value: spreadOf(ps["poll_p99_ms"], 4).Mean, Configured: cfg,
			Note: "lagprobe Result.PollP99Ms: 99th percentile of one poll's duration (SELECT writer, seq FROM replab_lag at the standby), mean over the default probe's runs; each lag is late by at most one interval plus one poll",
		})
	}
}

// watcherCost is what the watcher costs with no workload running: its
// own CPU (in this process) and the standby's, per poll and in cores.
type watcherCost struct {
	Seconds          float64 `json:"measured_s"`
	Polls            int64   `json:"polls"`
	PollsPerS        float64 `json:"polls_per_s"`
	BenchCores       float64 `json:"bench_process_cores"` // above this process's idle use
	StandbyCores     float64 `json:"standby_cores"`       // above the standby's idle use
	BenchUsPerPoll   float64 `json:"bench_process_cpu_us_per_poll"`
	StandbyUsPerPoll float64 `json:"standby_cpu_us_per_poll"`
	IdleBenchCores   float64 `json:"idle_bench_process_cores"`
	IdleStandbyCores float64 `json:"idle_standby_cores"`
	ResolutionMs     float64 `json:"resolution_ms"`
	IntervalP99Ms    float64 `json:"interval_p99_ms"`
	PollP50Ms        float64 `json:"poll_p50_ms"`
	PollP99Ms        float64 `json:"poll_p99_ms"`
}

const watcherAloneFor = 3 * time.Second

// watcherAlone measures the idle cost, then the watcher polling the idle
// standby every interval.
func (b *bench) watcherAlone(ctx context.Context, p *pgLab) (watcherCost, error) {
	var w watcherCost
	span := func(f func() error) (self, sb, wall float64, err error) {
		s0, b0, t0 := benchkit.SelfCPU(), nodeCPU(ctx, p.cluster, "sb"), time.Now()
		err = f()
		return benchkit.SelfCPU() - s0, nodeCPU(ctx, p.cluster, "sb") - b0, time.Since(t0).Seconds(), err
	}
	self, sb, wall, err := span(func() error { return benchkit.Sleep(ctx, watcherAloneFor) })
	if err != nil {
		return w, err
	}
	w.IdleBenchCores, w.IdleStandbyCores = benchkit.Round(self/wall, 3), benchkit.Round(sb/wall, 3)

	probe := lagprobe.New(lagprobe.Config{Writers: lagUsers, Interval: lagInterval, PollAlways: true})
	q, err := p.lagReader(ctx, "sb")
	if err != nil {
		return w, err
	}
	defer q.Close()
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- probe.Watch(wctx, "sb", q) }()
	defer func() { cancel(); <-done }()
	if err := probe.WaitWatching(ctx, "sb"); err != nil {
		return w, err
	}
	if err := benchkit.Sleep(ctx, 300*time.Millisecond); err != nil {
		return w, err
	}
	polls0 := probe.Results()["sb"].Polls
	self, sb, wall, err = span(func() error { return benchkit.Sleep(ctx, watcherAloneFor) })
	if err != nil {
		return w, err
	}
	r := probe.Results()["sb"]
	w.Seconds, w.Polls = benchkit.Round(wall, 3), r.Polls-polls0
	w.PollsPerS = benchkit.Round(float64(w.Polls)/wall, 1)
	w.BenchCores = benchkit.Round(max(self/wall-w.IdleBenchCores, 0), 3)
	w.StandbyCores = benchkit.Round(max(sb/wall-w.IdleStandbyCores, 0), 3)
	if w.Polls > 0 {
		w.BenchUsPerPoll = benchkit.Round(w.BenchCores*wall/float64(w.Polls)*1e6, 1)
		w.StandbyUsPerPoll = benchkit.Round(w.StandbyCores*wall/float64(w.Polls)*1e6, 1)
	}
	w.ResolutionMs, w.IntervalP99Ms, w.PollP50Ms, w.PollP99Ms = r.ResolutionMs, r.IntervalP99Ms, r.PollP50Ms, r.PollP99Ms
	return w, nil
}
