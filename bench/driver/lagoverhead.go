package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/clock"
	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/enginekit"
	"replab/internal/lagprobe"
	"replab/internal/stats"
	"replab/internal/workload"
)

// The lag probe's cost, measured inside each run: the machine's speed
// wanders by ±10–15 % between runs a few seconds apart (the servers'
// CPU per transaction changes with it: other virtual machines share the
// host), so comparing a run with the probe against one without, as the
// step did until 2026-11-27, could not resolve a few per cent. Each run
// instead alternates slices with the probe on and off — on, off, off,
// on, on, off, … 2 s each — and compares the transactions
// committed (and the CPU used) in its on slices with its off slices: both
// see the same machine within seconds of each other. "On" is what replab
// run does by default (the automatic sample, lag_sample = "auto": every
// Nth transaction of each user tracked, N chosen from the warmup, and the
// watcher at the replica polling while a tracked transaction may have
// become visible); an every run tracks every transaction in its on slices
// (lag_sample = 1). In off slices no transaction is tracked: the watcher
// has nothing to look for and waits without polling, its connection open.
const (
	lagUsers    = 8
	lagWarmup   = time.Second
	lagSlice    = 2 * time.Second
	lagSlices   = 8
	lagLead     = 500 * time.Millisecond // of the measure phase before the first slice
	lagMeasure  = lagLead + lagSlices*lagSlice + lagLead
	lagReps     = 20 // auto runs
	lagEveryRep = 3  // every runs, one after each of the first three auto runs
	lagInterval = lagprobe.DefaultInterval
	lagDelay    = "10ms"
)

const (
	variantAuto  = "auto"  // the default: automatic sample, adaptive watcher
	variantEvery = "every" // every transaction tracked, adaptive watcher
)

var lagVariants = []string{variantAuto, variantEvery}

// slicer places instants of one run in its slices.
type slicer struct {
	first int64 // clock ns: the first slice's start
	flip  bool  // the run starts with an off slice
}

// on says whether slice k has the probe on: on, off, off, on, … (off,
// on, on, off, … when flipped), so that a drift that is linear over four
// slices weighs on both alike; runs alternate the two, so that what
// happens at the same point of every run (the first seconds after the
// warmup run faster or slower) weighs on both alike too.
func (s slicer) on(k int) bool { return (k%4 == 0 || k%4 == 3) != s.flip }

// at is the slice holding now, or -1 outside them (the warmup, the
// measure phase's lead and tail).
func (s slicer) at(now int64) int {
	if now < s.first {
		return -1
	}
	k := int((now - s.first) / int64(lagSlice))
	if k >= lagSlices {
		return -1
	}
	return k
}

// slicedJournal is a user's lag journal that tracks nothing in off
// slices: Next returns 0 there, which the driver takes as "not tracked".
type slicedJournal struct {
	driver.LagJournal
	s       slicer
	tracked *[lagSlices]atomic.Int64
}

func (j slicedJournal) Next() int64 {
	k := j.s.at(clock.Now())
	if k >= 0 && !j.s.on(k) {
		return 0
	}
	seq := j.LagJournal.Next()
	if k >= 0 {
		j.tracked[k].Add(1)
	}
	return seq
}

// sliceCounter counts commits per slice (driver.Observer).
type sliceCounter struct {
	s       slicer
	commits [lagSlices]atomic.Int64
}

func (c *sliceCounter) Committed(string, int64) {
	if k := c.s.at(clock.Now()); k >= 0 {
		c.commits[k].Add(1)
	}
}

func (c *sliceCounter) Failed(string, string) {}

// sliced is one run whose slices alternate a cost on and off (the lag
// probe, the history): the lab, the pool and the driver's configuration;
// install puts the cost's switch into the configuration once the slices
// are placed (sl); counted, when set, counts per slice what the cost did
// (tracked transactions, operations recorded), and cumulative, when set,
// is a running count read at each slice boundary (the watcher's polls).
type sliced struct {
	p          *pgLab
	db         *sql.DB
	cfg        driver.Config
	tx         workload.TxType
	flip       bool
	install    func(sl slicer, cfg *driver.Config)
	counted    *[lagSlices]atomic.Int64
	cumulative func() int64
}

// slicedOut is what a sliced run measured: the driver's result, each
// slice, the sums of the on and of the off slices, and how busy the
// machine was in the measure phase.
type slicedOut struct {
	res     *driver.Result
	slices  []lagSliceRun
	on, off lagSliceRun
	busy    float64
	quiet   benchkit.QuietWait
}

// slicedRun waits for a quiet machine, places the slices from now (the
// measure phase's lead after the warmup), runs the driver with the
// cost's switch installed, and samples at each slice boundary the CPU of
// this process, of the primary db and of the standby sb, the clock and
// the cumulative count. Commits are counted per slice as they return
// (driver.Observer).
func (b *bench) slicedRun(ctx context.Context, s sliced) (slicedOut, error) {
	var out slicedOut
	var err error
	if out.quiet, err = benchkit.WaitQuiet(ctx, quiet); err != nil {
		return out, err
	}
	// The slices are placed from now; driver.Run starts its own clock a
	// few ms later, so they begin a little less than lagLead into its
	// measure phase.
	sl := slicer{first: clock.Now() + int64(lagWarmup+lagLead), flip: s.flip}
	cfg := s.cfg
	s.install(sl, &cfg)
	counter := &sliceCounter{s: sl}
	cfg.Observer = counter
	type mark struct {
		at            int64
		self, pri, sb float64
		n             int64
	}
	marks := make([]mark, 0, lagSlices+1)
	sctx, stopMarks := context.WithCancel(ctx)
	defer stopMarks()
	marked := make(chan struct{})
	var meter benchkit.CPUMeter
	go func() {
		defer close(marked)
		sleeper := clock.NewSleeper()
		for k := 0; k <= lagSlices; k++ {
			if !sleeper.UntilCtx(sctx, sl.first+int64(k)*int64(lagSlice)) {
				return
			}
			if k == 0 {
				meter = benchkit.StartCPU()
			}
			var n int64
			if s.cumulative != nil {
				n = s.cumulative()
			}
			marks = append(marks, mark{clock.Now(), benchkit.SelfCPU(), nodeCPU(ctx, s.p.cluster, "db"), nodeCPU(ctx, s.p.cluster, "sb"), n})
		}
	}()
	out.res, err = driver.Run(ctx, cfg, []workload.TxType{s.tx}, driver.Sources(s.db))
	<-marked
	if err != nil {
		return out, err
	}
	if !out.res.Complete {
		return out, fmt.Errorf("driver: %s", out.res.StopReason)
	}
	if len(marks) != lagSlices+1 {
		return out, fmt.Errorf("the driver ended %d slices early", lagSlices+1-len(marks))
	}
	out.busy = meter.Read().MachineBusy
	for k := range lagSlices {
		a, z := marks[k], marks[k+1]
		sr := lagSliceRun{On: sl.on(k), Seconds: float64(z.at-a.at) / 1e9, Commits: counter.commits[k].Load(),
			Polls: z.n - a.n, BenchCPUS: z.self - a.self, PrimaryCPUS: z.pri - a.pri, StandbyCPUS: z.sb - a.sb}
		if s.counted != nil {
			sr.Tracked = s.counted[k].Load()
		}
		out.slices = append(out.slices, sr)
		sum := &out.off
		if sr.On {
			sum = &out.on
		}
		sum.Seconds += sr.Seconds
		sum.Commits += sr.Commits
		sum.Tracked += sr.Tracked
		sum.Polls += sr.Polls
		sum.BenchCPUS += sr.BenchCPUS
		sum.PrimaryCPUS += sr.PrimaryCPUS
		sum.StandbyCPUS += sr.StandbyCPUS
	}
	if out.on.Commits == 0 || out.off.Commits == 0 {
		return out, fmt.Errorf("no commits in the on or off slices (%d, %d)", out.on.Commits, out.off.Commits)
	}
	return out, nil
}

// lagSliceRun is one slice of a run.
type lagSliceRun struct {
	On      bool    `json:"on"`
	Seconds float64 `json:"seconds"`
	Commits int64   `json:"commits"`
	Tracked int64   `json:"tracked"`
	Polls   int64   `json:"polls"`
	// CPU in the slice, in seconds: this process, the primary, the
	// replica.
	BenchCPUS   float64 `json:"bench_process_cpu_s"`
	PrimaryCPUS float64 `json:"primary_cpu_s"`
	StandbyCPUS float64 `json:"standby_cpu_s"`
}

// lagRun is one run of one variant.
type lagRun struct {
	Variant       string  `json:"variant"`
	Rep           int     `json:"rep"`
	TPS           float64 `json:"tps"`          // the whole measure phase
	Transactions  int64   `json:"transactions"` // measure phase
	Errors        int64   `json:"errors"`
	LatencyMeanMs float64 `json:"latency_mean_ms"`
	LatencyP99Ms  float64 `json:"latency_p99_ms"`
	// The slices taken together: TPS and CPU per transaction committed
	// (this process — driver, watcher, link emulator carrying the
	// replication stream —, primary, replica) with the probe on and off,
	// and what the two say of its cost in %.
	TPSOn          float64 `json:"tps_on"`
	TPSOff         float64 `json:"tps_off"`
	OverheadPct    float64 `json:"overhead_pct"`     // 1 − TPSOn / TPSOff
	CPUOverheadPct float64 `json:"cpu_overhead_pct"` // 1 − CPU per tx off / on
	BenchCPUOnUs   float64 `json:"bench_process_cpu_on_us_per_tx"`
	BenchCPUOffUs  float64 `json:"bench_process_cpu_off_us_per_tx"`
	PrimaryOnUs    float64 `json:"primary_cpu_on_us_per_tx"`
	PrimaryOffUs   float64 `json:"primary_cpu_off_us_per_tx"`
	StandbyOnUs    float64 `json:"standby_cpu_on_us_per_tx"`
	StandbyOffUs   float64 `json:"standby_cpu_off_us_per_tx"`
	// Polls and tracked transactions per second in the on slices, polls
	// per second in the off ones (those still looking for a transaction
	// tracked just before the slice began).
	PollsPerSOn   float64 `json:"polls_per_s_on"`
	PollsPerSOff  float64 `json:"polls_per_s_off"`
	TrackedPerSOn float64 `json:"tracked_per_s_on"`
	MachineBusy   float64 `json:"machine_busy_fraction"` // the measure phase
	// Slices lists each slice; Probe is the watcher's view of the whole
	// run, SampleEvery the N the driver used.
	Slices      []lagSliceRun      `json:"slices"`
	Quiet       benchkit.QuietWait `json:"wait_for_quiet_machine"`
	Probe       *lagprobe.Result   `json:"probe,omitempty"`
	SampleEvery int                `json:"sample_every,omitempty"`
}

// lagTarget is the system the lag step measures the probe on: a
// primary db and a replica sb lagDelay apart, a table of accounts, and a
// single-row UPDATE by key as the transaction.
type lagTarget struct {
	prefix  string // of every figure's name: "" (PostgreSQL) or "mariadb_"
	lab     string
	engine  engine.Engine
	dialect engine.Dialect
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
	lab: "bench-lagprobe", engine: postgres.Engine{}, dialect: engine.Postgres,
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
	prep:   []string{"VACUUM pgbench_accounts", "VACUUM " + enginekit.LagTableName, "CHECKPOINT"},
}

// upLagLab brings up t's lab — the primary db and the standby sb lagDelay
// apart — with its accounts and replab_lag loaded at both. The caller
// closes it.
func (b *bench) upLagLab(ctx context.Context, t lagTarget) (*pgLab, error) {
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
		return nil, err
	}
	t0 := time.Now()
	err = t.load(ctx, b, p)
	if err == nil {
		err = p.sql().ApplySchema(ctx, engine.Schema{Tables: []engine.Table{enginekit.LagTable()}})
	}
	if err == nil {
		err = p.cluster.WaitFlowing(ctx)
	}
	if err != nil {
		p.close()
		return nil, err
	}
	logf("      %d accounts and replab_lag at the primary, at the replica too, in %.1f s", compareAccounts, time.Since(t0).Seconds())
	return p, nil
}

func (b *bench) lagOverheadOn(ctx context.Context, t lagTarget) error {
	p, err := b.upLagLab(ctx, t)
	if err != nil {
		return err
	}
	defer p.close()

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
		variants := []string{variantAuto}
		if rep < lagEveryRep {
			variants = append(variants, variantEvery)
		}
		for _, v := range variants {
			r, err := b.lagRun(ctx, p, t, v, rep+1)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", v, rep+1, err)
			}
			runs = append(runs, r)
			logf("      %-5s run %2d: %5.0f tps on, %5.0f off: %+6.2f %%; CPU µs/tx on/off: bench %.1f/%.1f, primary %.1f/%.1f, replica %.1f/%.1f (%+.2f %%); machine busy %.0f%%; every %d tracked (%.0f/s on), %.0f polls/s on, %.0f off, every %.3f ms (p99 %.3f) from %.1f ms after COMMIT, %d window hits, lag p50 %.1f ms",
				v, rep+1, r.TPSOn, r.TPSOff, r.OverheadPct, r.BenchCPUOnUs, r.BenchCPUOffUs, r.PrimaryOnUs, r.PrimaryOffUs, r.StandbyOnUs, r.StandbyOffUs, r.CPUOverheadPct, 100*r.MachineBusy,
				r.SampleEvery, r.TrackedPerSOn, r.PollsPerSOn, r.PollsPerSOff, r.Probe.ResolutionMs, r.Probe.IntervalP99Ms, r.Probe.FloorMs, r.Probe.WindowHits, r.Probe.LagMs.P50)
		}
	}
	b.addLag(t, runs, alone)
	return nil
}

// lagRun resets the database to the same state, then runs one variant,
// its slices alternating the probe on and off.
func (b *bench) lagRun(ctx context.Context, p *pgLab, t lagTarget, variant string, rep int) (lagRun, error) {
	probe := lagprobe.New(lagprobe.Config{Writers: lagUsers, Interval: lagInterval})
	seed, err := enginekit.LagSeedSQL(t.dialect, lagUsers)
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
	stopWatch, err := watchStandby(ctx, p, probe)
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
	if cfg.LagStatement, err = enginekit.LagUpdateSQL(t.dialect); err != nil {
		return run, err
	}
	cfg.LagEvery = 0 // automatic, as replab run by default
	if variant == variantEvery {
		cfg.LagEvery = 1
	}
	var tracked [lagSlices]atomic.Int64
	out, err := b.slicedRun(ctx, sliced{p: p, db: db, cfg: cfg, tx: t.tx, flip: rep%2 == 0, counted: &tracked,
		install: func(sl slicer, cfg *driver.Config) {
			cfg.Lag = func(i int) driver.LagJournal { return slicedJournal{probe.Writer(i), sl, &tracked} }
		},
		cumulative: func() int64 { return probe.Results()["sb"].Polls }})
	run.Quiet = out.quiet
	if err != nil {
		return run, err
	}
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

	cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
	err = probe.WaitCaughtUp(cctx)
	ccancel()
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
	per := map[string]map[string][]float64{variantAuto: {}, variantEvery: {}} // variant → stat → per run
	for _, r := range runs {
		ps := per[r.Variant]
		add := func(k string, v float64) { ps[k] = append(ps[k], v) }
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
		add("tracked_per_s_on", r.TrackedPerSOn)
		add("machine_busy_fraction", r.MachineBusy)
		add("sample_every", float64(r.SampleEvery))
		add("resolution_ms", r.Probe.ResolutionMs)
		add("interval_p99_ms", r.Probe.IntervalP99Ms)
		add("poll_p50_ms", r.Probe.PollP50Ms)
		add("poll_p99_ms", r.Probe.PollP99Ms)
		add("floor_ms", r.Probe.FloorMs)
		add("window_hits", float64(r.Probe.WindowHits))
		add("lag_p50_ms", r.Probe.LagMs.P50)
		add("lag_p99_ms", r.Probe.LagMs.P99)
	}
	mean := func(v, k string) float64 { return spreadOf(per[v][k], 3).Mean }
	perVariant := map[string]any{}
	for _, v := range lagVariants {
		m := map[string]any{}
		for k, xs := range per[v] {
			m[k] = spreadOf(xs, 3)
		}
		perVariant[v] = m
	}
	cfg := map[string]any{
		"users": lagUsers, "link": fmt.Sprintf("db <-> sb, %s each way, 1gbit", lagDelay), "interval_ms": float64(lagInterval) / 1e6,
		"transaction": t.txText, "client_site": "db", "scheme": t.scheme,
		"warmup_s": lagWarmup.Seconds(), "measure_s": lagMeasure.Seconds(), "repetitions": lagReps,
		"slices":   fmt.Sprintf("%d of %s from %s into the measure phase: on, off, off, on, … in odd runs, off, on, on, off, … in even ones", lagSlices, lagSlice, lagLead),
		"variants": "auto in the on slices (replab's default: lag_sample = \"auto\", at most " + fmt.Sprint(driver.DefaultLagBudget) + " tracked/s, adaptive watcher); every in the on slices of the every runs (lag_sample = 1); nothing tracked in the off slices (the watcher idle, its connection open)",
		"order":    fmt.Sprintf("%d auto runs; the first %d each followed by an every run; %s replica caught up before each", lagReps, lagEveryRep, strings.Join(append(t.prep, ""), " + ")),
	}
	autoS, everyS := spreadOf(per[variantAuto]["overhead_pct"], 2), spreadOf(per[variantEvery]["overhead_pct"], 2)
	cpuS := spreadOf(per[variantAuto]["cpu_overhead_pct"], 2)
	logf("      auto: %.2f %% ± %.2f (95 %% CI) of throughput, %.2f %% of CPU per transaction; every: %.2f %%",
		autoS.Mean, stats.MeanCI(per[variantAuto]["overhead_pct"], 0.95).HalfWidth, cpuS.Mean, everyS.Mean)
	b.r.Add(Figure{
		Name: t.prefix + "lag_overhead_pct", Value: autoS.Mean, Configured: cfg,
		Target: "<= 3 %", TargetMax: benchkit.Ptr(3.0),
		Note: fmt.Sprintf("replab's default probe (automatic sample, adaptive watcher): mean over %d runs of 1 − TPS in the run's on slices / TPS in its off slices, in %%: %.2f ± %.2f (sd, 95%% CI ± %.2f), from %.2f to %.2f; from CPU per transaction (this process + primary + replica, on vs off slices) %.2f ± %.2f (sd)",
			len(per[variantAuto]["overhead_pct"]), autoS.Mean, autoS.SD, benchkit.Round(stats.MeanCI(per[variantAuto]["overhead_pct"], 0.95).HalfWidth, 2), autoS.Min, autoS.Max, cpuS.Mean, cpuS.SD),
		Details: map[string]any{"per_run_pct": per[variantAuto]["overhead_pct"], "per_run": autoS, "variants": perVariant, "runs": runs,
			"cpu_estimate_pct": cpuS.Mean, "cpu_per_run_pct": per[variantAuto]["cpu_overhead_pct"]},
	})
	// A model from what the probe's parts cost: its polls at what a poll
	// costs on the idle machine (the watcher alone), and its tracked
	// transactions at what a tracked statement costs (every's extra CPU
	// per transaction in its on slices less its polls' share), as a share
	// of the machine's cores. It leaves out interference (caches,
	// scheduling).
	perPollUs := 0.0
	if alone.PollsPerS > 0 {
		perPollUs = (alone.BenchCores + alone.StandbyCores) * 1e6 / alone.PollsPerS
	}
	stmtUs := 0.0
	if tps := mean(variantEvery, "tps_on"); tps > 0 {
		stmtUs = max(mean(variantEvery, "cpu_on_us_per_tx")-mean(variantEvery, "cpu_off_us_per_tx")-mean(variantEvery, "polls_per_s_on")*perPollUs/tps, 0)
	}
	cores := float64(runtime.NumCPU())
	modelPct := (mean(variantAuto, "polls_per_s_on")*perPollUs + mean(variantAuto, "tracked_per_s_on")*stmtUs) / (cores * 1e6) * 100
	b.r.Add(Figure{
		Name: t.prefix + "lag_overhead_model_pct", Value: benchkit.Round(modelPct, 2), Configured: cfg,
		Target: "<= 3 %", TargetMax: benchkit.Ptr(3.0),
		Note: fmt.Sprintf("CPU the default probe takes, as a share of the %.0f cores: %.1f polls/s × %.1f µs per poll (the watcher alone, this process + replica) + %.1f tracked/s × %.1f µs per tracked statement (every's extra CPU per transaction in its on slices less its polls); leaves out interference",
			cores, mean(variantAuto, "polls_per_s_on"), perPollUs, mean(variantAuto, "tracked_per_s_on"), stmtUs),
		Details: map[string]any{"cpu_per_poll_us": benchkit.Round(perPollUs, 1), "cpu_per_tracked_statement_us": benchkit.Round(stmtUs, 1),
			"polls_per_s": mean(variantAuto, "polls_per_s_on"), "tracked_per_s": mean(variantAuto, "tracked_per_s_on"), "cores": cores},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_every_overhead_pct", Value: everyS.Mean, Configured: cfg,
		Note:    fmt.Sprintf("every transaction tracked (lag_sample = 1) in the on slices: mean over %d runs of 1 − TPS(on) / TPS(off): %.2f ± %.2f (sd)", len(per[variantEvery]["overhead_pct"]), everyS.Mean, everyS.SD),
		Details: map[string]any{"per_run_pct": per[variantEvery]["overhead_pct"], "per_run": everyS, "cpu_estimate_pct": spreadOf(per[variantEvery]["cpu_overhead_pct"], 2).Mean},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_watcher_cpu_cores", Value: benchkit.Round(alone.BenchCores+alone.StandbyCores, 3), Configured: cfg,
		Note: fmt.Sprintf("one watcher polling the idle replica every 1 ms without pause (PollAlways), no workload, %s: CPU above idle of this process (%.3f cores, %.1f µs per poll) plus the replica's (%.3f cores, %.1f µs per poll) — what adaptive polling avoids",
			watcherAloneFor, alone.BenchCores, alone.BenchUsPerPoll, alone.StandbyCores, alone.StandbyUsPerPoll),
		Details: map[string]any{"watcher_alone": alone},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_resolution_idle_ms", Value: alone.ResolutionMs, Configured: cfg, Expected: benchkit.Ptr(float64(lagInterval) / 1e6),
		Note: fmt.Sprintf("lagprobe ResolutionMs polling without pause and no workload (machine otherwise as busy as it was); interval p99 %.3f ms, poll p50 %.3f ms, poll p99 %.3f ms",
			alone.IntervalP99Ms, alone.PollP50Ms, alone.PollP99Ms),
	})
	ps := per[variantAuto]
	b.r.Add(Figure{
		Name: t.prefix + "lag_resolution_ms", Value: spreadOf(ps["resolution_ms"], 4).Mean, Configured: cfg, Expected: benchkit.Ptr(float64(lagInterval) / 1e6),
		Target: "<= 1 ms (configured interval)",
		Note:   "lagprobe Result.ResolutionMs of the auto runs: the achieved mean interval between consecutive poll starts (configured 1 ms); details has the interval p99, poll durations, polls/s, the floor and window hits",
		Details: map[string]any{"resolution_ms": spreadOf(ps["resolution_ms"], 4), "interval_p99_ms": spreadOf(ps["interval_p99_ms"], 4),
			"poll_p50_ms": spreadOf(ps["poll_p50_ms"], 4), "poll_p99_ms": spreadOf(ps["poll_p99_ms"], 4),
			"polls_per_s_on": spreadOf(ps["polls_per_s_on"], 1), "floor_ms": spreadOf(ps["floor_ms"], 3), "window_hits": spreadOf(ps["window_hits"], 1)},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_tracked_per_s", Value: spreadOf(ps["tracked_per_s_on"], 1).Mean, Configured: cfg,
		Note:    fmt.Sprintf("transactions tracked per second in the auto runs' on slices: every %.0f-th of each user (mean N)", spreadOf(ps["sample_every"], 1).Mean),
		Details: map[string]any{"sample_every": spreadOf(ps["sample_every"], 1)},
	})
	b.r.Add(Figure{
		Name: t.prefix + "lag_poll_p99_ms", Value: spreadOf(ps["poll_p99_ms"], 4).Mean, Configured: cfg,
		Note: "lagprobe Result.PollP99Ms: 99th percentile of one poll's duration (SELECT writer, seq FROM replab_lag at the replica), mean over the auto runs; each lag is late by at most one interval plus one poll",
	})
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
	return measureWatcher(ctx, p, func() (*lagprobe.Probe, func() error, error) {
		probe := lagprobe.New(lagprobe.Config{Writers: lagUsers, Interval: lagInterval, PollAlways: true})
		stop, err := watchStandby(ctx, p, probe)
		return probe, stop, err
	})
}

// measureWatcher measures this process's and the standby's CPU idle, then
// with the watcher that start starts polling the idle standby: the cost of
// a poll, both sides, and the achieved interval.
func measureWatcher(ctx context.Context, p *pgLab, start func() (*lagprobe.Probe, func() error, error)) (watcherCost, error) {
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
	probe, stopWatch, err := start()
	if err != nil {
		return w, err
	}
	defer stopWatch()
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

// watchStandby starts probe's watcher at node sb, as replab run does, and
// waits for its first poll. stop ends it and says why it ended; it may be
// called more than once.
func watchStandby(ctx context.Context, p *pgLab, probe *lagprobe.Probe) (stop func() error, err error) {
	q, err := p.lagReader(ctx, "sb")
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- probe.Watch(wctx, "sb", q) }()
	var once sync.Once
	var werr error
	stop = func() error {
		once.Do(func() {
			cancel()
			werr = <-done
			q.Close()
		})
		return werr
	}
	if err := probe.WaitWatching(ctx, "sb"); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}
