// Package runner is `replab run`: it builds the lab and the engine's
// scheme, creates and loads the workload's data, runs the driver with a
// lag watcher per replica, checks that replicas caught up, writes the
// results directory and tears everything down.
package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"

	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/lab"
	"replab/internal/lagprobe"
	"replab/internal/monitor"
	"replab/internal/report"
	"replab/internal/spec"
	"replab/internal/stats"
	"replab/internal/workload"
)

// Options tune a run.
type Options struct {
	Out       string // results directory; "" = results/<timestamp>-<lab name>
	StateRoot string
	DataRoot  string
	Log       io.Writer // progress; nil = discard
	Version   string    // replab's version, recorded in the environment
	Engines   *engine.Registry
	Workloads *workload.Registry
	// Live, when true, redraws one progress line in place (a terminal).
	Live bool
}

// Run executes the spec: one measurement, repetitions of it, or a sweep
// of either. The results directory is written even when the run fails or
// is interrupted, with complete = false. For a sweep the summary returned
// is nil (see sweep.json).
func Run(ctx context.Context, s *spec.Spec, opt Options) (*report.Summary, string, error) {
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	eng, wl, err := check(s, opt)
	if err != nil {
		return nil, "", err
	}
	dir, err := report.NewDir(opt.Out, s.Lab.Name)
	if err != nil {
		return nil, "", err
	}
	if s.File != "" {
		_ = dir.CopyFile(s.File, "spec.toml")
	}
	if len(s.Sweep) > 0 {
		return nil, dir.Path, runSweep(ctx, s, opt, dir)
	}
	sum, err := runPoint(ctx, s, opt, eng, wl, dir)
	return sum, dir.Path, err
}

// check finds the spec's engine and workload.
func check(s *spec.Spec, opt Options) (engine.Engine, workload.Workload, error) {
	eng, err := opt.Engines.For(s)
	if err != nil {
		return nil, nil, err
	}
	if eng == nil {
		return nil, nil, s.Errorf("engine", "replab run needs [engine], [node.NAME] and [workload] tables; for a network-only lab use `replab lab check`")
	}
	wl, err := opt.Workloads.For(s, eng.Dialect())
	if err != nil {
		return nil, nil, err
	}
	if wl == nil {
		return nil, nil, s.Errorf("workload", `replab run needs a [workload] table, e.g. kind = "personnel"`)
	}
	return eng, wl, nil
}

// runPoint sets up one lab and measures it once or repeatedly.
func runPoint(ctx context.Context, s *spec.Spec, opt Options, eng engine.Engine, wl workload.Workload, dir *report.Dir) (_ *report.Summary, err error) {
	r := &run{s: s, opt: opt, log: opt.Log, eng: eng, wl: wl, dir: dir}
	defer func() {
		if terr := r.teardown(); terr != nil {
			err = errors.Join(err, terr)
		}
	}()
	if err := r.setup(ctx); err != nil {
		sum := r.newSummary()
		sum.Complete, sum.StopReason = false, stopReason(ctx, err)
		return sum, errors.Join(err, r.writeAll(dir, sum))
	}
	rs := s.Run
	if rs.Repetitions <= 1 && rs.Confidence == 0 {
		sum, err := r.measure(ctx, dir)
		return sum, errors.Join(err, r.writeAll(dir, sum))
	}
	return r.repeat(ctx, dir)
}

func stopReason(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return "interrupted: " + err.Error()
	}
	return err.Error()
}

type run struct {
	s   *spec.Spec
	opt Options
	log io.Writer
	eng engine.Engine
	wl  workload.Workload
	dir *report.Dir
	sum *report.Summary

	lab      *lab.Lab
	cluster  engine.Cluster
	nodes    []engine.Node
	sources  []engine.Node
	replicas []engine.Node
	client   string
	setupS   float64
	loaded   *report.Load
	env      report.Environment
	measured int // measurements so far

	probe   *lagprobe.Probe
	mon     *monitor.Monitor // this measurement's monitors, until stopMonitor
	res     *driver.Result
	lagHist map[string]*hdrhistogram.Histogram

	lastBytes map[string]uint64 // for the progress line
	lastAt    time.Time
}

// setup builds the lab and the cluster, creates the schema and loads the
// data once for every measurement of this point.
func (r *run) setup(ctx context.Context) (err error) {
	start := time.Now()
	fmt.Fprintf(r.log, "lab %s: building %d sites and %d links\n", r.s.Lab.Name, len(r.s.Sites), len(r.s.Links))
	r.lab, err = lab.Up(ctx, r.s, lab.Options{StateRoot: r.opt.StateRoot, DataRoot: r.opt.DataRoot, Log: r.log, SeriesCSV: r.dir.File("links.csv")})
	if err != nil {
		return err
	}
	r.cluster, err = r.eng.Up(ctx, r.lab, r.log)
	if err != nil {
		return fmt.Errorf("engine %s: %w", r.eng.Kind(), err)
	}
	r.nodes = r.cluster.Nodes()
	if len(r.nodes) > 0 {
		r.env = report.CaptureEnvironment(r.opt.Version, r.nodes[0].Version)
	}
	r.sources = r.sourceNodes(r.nodes)
	r.replicas = r.replicaNodes(r.nodes)
	r.client = r.clientSite()

	probe := lagprobe.New(lagprobe.Config{Writers: r.s.Run.Users})
	schema := r.wl.Schema()
	schema.Tables = append(schema.Tables, probe.Table())
	if err := r.cluster.ApplySchema(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	if err := r.load(ctx, r.sources[0]); err != nil {
		return err
	}
	r.setupS = time.Since(start).Seconds()
	return nil
}

// teardown stops the cluster and removes the lab.
func (r *run) teardown() error {
	if r.lab == nil {
		return nil
	}
	fmt.Fprintf(r.log, "lab %s: tearing down\n", r.s.Lab.Name)
	if r.cluster != nil {
		_ = r.cluster.Close()
	}
	if err := r.lab.Close(); err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	return nil
}

func (r *run) newSummary() *report.Summary {
	sum := &report.Summary{
		Kind: "run", Name: r.s.Lab.Name, Started: time.Now().UTC(), SpecFile: r.s.File, Engine: r.eng.Kind(),
		Scheme: r.s.Scheme.Replication, Workload: r.s.Workload.Kind, Replicas: map[string]*report.Replica{},
		SetupS: r.setupS, Load: r.loaded, Environment: r.env,
	}
	if sum.Scheme == "" {
		sum.Scheme = "default"
	}
	return sum
}

// measure runs the driver once with a lag watcher per replica and
// returns its summary; results files go to dir.
func (r *run) measure(ctx context.Context, dir *report.Dir) (_ *report.Summary, err error) {
	r.measured++
	r.sum = r.newSummary()
	r.res, r.lagHist = nil, nil
	defer func() {
		if err != nil {
			r.sum.Complete = false
			if r.sum.StopReason == "" {
				r.sum.StopReason = stopReason(ctx, err)
			}
		}
	}()
	// Every measurement starts its writers' sequences from zero, at every
	// replica too.
	r.probe = lagprobe.New(lagprobe.Config{Writers: r.s.Run.Users, Interval: r.s.Run.LagInterval})
	for _, src := range r.sources {
		if err := r.execOn(ctx, src, r.probe.SeedStatements(r.eng.Dialect())...); err != nil {
			return r.sum, fmt.Errorf("seed lag table: %w", err)
		}
		if r.s.Scheme.Replication == "multimaster" {
			break // the seed rows replicate to the other masters
		}
	}
	fmt.Fprintf(r.log, "waiting for every replica to have the data\n")
	if err := r.cluster.WaitFlowing(ctx); err != nil {
		return r.sum, err
	}

	// Watchers, engine samples, driver.
	r.probe = lagprobe.New(lagprobe.Config{Writers: r.s.Run.Users, Interval: r.s.Run.LagInterval})
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var wg sync.WaitGroup
	watchErr := make(chan error, len(r.replicas))
	for _, n := range r.replicas {
		q, err := r.querier(ctx, n)
		if err != nil {
			return r.sum, err
		}
		defer q.close()
		r.sum.Replicas[n.Name] = r.newReplica(n.Site)
		opts := lagprobe.WatchOptions{Skip: r.ownWriters(n.Name)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.probe.WatchWith(wctx, n.Name, q, opts); err != nil && wctx.Err() == nil {
				watchErr <- fmt.Errorf("lag watcher at %s: %w", n.Name, err)
			}
		}()
	}
	// Transactions already visible at a watcher's first poll would get no
	// lag: start only once every watcher has looked.
	var watched []string
	for _, n := range r.replicas {
		watched = append(watched, n.Name)
	}
	if len(watched) > 0 {
		if err := r.probe.WaitWatching(ctx, watched...); err != nil {
			return r.sum, fmt.Errorf("lag watchers: %w", err)
		}
	}
	// Monitors: links, processes by role and the engine's replication
	// state, sampled into dir (roles.csv, replication.csv). Started just
	// before the driver, so their t_s is close to series.csv's.
	r.mon, err = monitor.Start(ctx, monitor.Config{Lab: r.lab, Cluster: r.cluster, Dir: dir.Path})
	if err != nil {
		return r.sum, err
	}
	defer r.stopMonitor() // early returns; a no-op after the call below

	dbs := make([]*sql.DB, 0, len(r.sources))
	for _, src := range r.sources {
		db, err := r.cluster.Open(ctx, src.Name, r.client)
		if err != nil {
			return r.sum, err
		}
		db.SetMaxOpenConns(r.s.Run.Users + 2)
		defer db.Close()
		dbs = append(dbs, db)
	}
	cfg := r.driverConfig()
	mode := fmt.Sprintf("%d users", cfg.Users)
	if cfg.RatePerSec > 0 {
		mode = fmt.Sprintf("open loop at %.2f/s (%d connections)", cfg.RatePerSec, cfg.Users)
	}
	fmt.Fprintf(r.log, "running %s from site %s against %s: warmup %s, measure %s, cooldown %s\n",
		mode, r.client, names(r.sources), cfg.Warmup, cfg.Duration, cfg.Cooldown)
	r.res, err = driver.Run(ctx, cfg, r.wl.Transactions(), dbs)
	if r.opt.Live {
		fmt.Fprintln(r.log)
	}
	if err != nil {
		return r.sum, err
	}
	r.fillDriver()

	// Replicas catch up; then stop watching.
	if len(r.replicas) > 0 && ctx.Err() == nil {
		fmt.Fprintf(r.log, "waiting for replicas to catch up\n")
		cctx, cancel := context.WithTimeout(ctx, r.catchUpTimeout())
		if err := r.probe.WaitCaughtUp(cctx); err != nil {
			fmt.Fprintf(r.log, "warning: replicas did not catch up within %s: %v\n", r.catchUpTimeout(), err)
		}
		cancel()
	}
	stopWatch()
	wg.Wait()
	close(watchErr)
	var werrs []error
	for e := range watchErr {
		werrs = append(werrs, e)
	}
	r.stopMonitor() // after the catch-up, so replication.csv shows it
	r.fillLag()
	r.sum.Steady = steadiness(r.res.Series)
	if !r.res.Complete {
		return r.sum, errors.New(r.res.StopReason)
	}
	return r.sum, errors.Join(werrs...)
}

// sourceNodes are the nodes clients write to: the primary, or every master.
func (r *run) sourceNodes(nodes []engine.Node) []engine.Node {
	var out []engine.Node
	for _, n := range nodes {
		if n.Role == "primary" || n.Role == "master" {
			out = append(out, n)
		}
	}
	return out
}

// replicaNodes are every node that receives changes from a source.
func (r *run) replicaNodes(nodes []engine.Node) []engine.Node {
	if r.s.Scheme.Replication == "multimaster" {
		// Each master is a replica of the others; lag is tracked per
		// master for the writers whose source is elsewhere.
		return nodes
	}
	var out []engine.Node
	for _, n := range nodes {
		if n.Role != "primary" && n.Role != "master" {
			out = append(out, n)
		}
	}
	return out
}

// ownWriters is, for a source that is also watched (a multi-master node),
// the users that write at it: the driver gives user i source i mod n.
// Their changes are local there, not replicated, so that node skips them.
func (r *run) ownWriters(node string) func(int) bool {
	for k, src := range r.sources {
		if src.Name == node {
			n := len(r.sources)
			return func(w int) bool { return w%n == k }
		}
	}
	return nil
}

func (r *run) clientSite() string {
	if r.s.Run.Client != "" {
		return r.s.Run.Client
	}
	return r.sources[0].Site
}

func names(ns []engine.Node) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Name)
	}
	return strings.Join(s, ", ")
}

// pgConn connects to a node from a site with pgx (for COPY and the lag
// watcher).
func (r *run) pgConn(ctx context.Context, n engine.Node, fromSite string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(n.DSN)
	if err != nil {
		return nil, err
	}
	site := r.lab.Site(fromSite)
	cfg.DialFunc = site.DialContext
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s from %s: %w", n.Name, fromSite, err)
	}
	return c, nil
}

func (r *run) execOn(ctx context.Context, n engine.Node, stmts ...string) error {
	if r.eng.Dialect() != "postgres" {
		return fmt.Errorf("dialect %s: no executor", r.eng.Dialect())
	}
	c, err := r.pgConn(ctx, n, n.Site)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// load fills the initial data from the source's own site, with a progress
// line (rows/s and ETA).
func (r *run) load(ctx context.Context, src engine.Node) error {
	total := r.wl.TotalRows()
	if total == 0 {
		return nil
	}
	c, err := r.pgConn(ctx, src, src.Site)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
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
	if err := r.wl.Load(ctx, workload.PostgresLoader(c), progress); err != nil {
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

func (r *run) driverConfig() driver.Config {
	rs := r.s.Run
	cfg := driver.Config{
		Users: rs.Users, Warmup: rs.Warmup, Duration: rs.Duration, Cooldown: rs.Cooldown,
		RatePerSec: rs.RatePerSec, Poisson: rs.Arrival != "regular", ThinkMin: rs.ThinkMin, ThinkMax: rs.ThinkMax,
		Seed: rs.Seed, MaxErrorPct: rs.MaxErrorPct, MaxRetries: 3,
		Lag:          func(i int) driver.LagJournal { return r.probe.Writer(i) },
		LagStatement: r.probe.UpdateStatement(r.eng.Dialect()),
		LagEvery:     rs.LagSample,
	}
	var marked sync.Once
	cfg.Progress = func(p driver.Progress) {
		marked.Do(func() {
			// The driver's clock started p.Elapsed ago; the measure phase
			// follows the warmup. Only it counts in the monitors' summary.
			start := time.Now().Add(-p.Elapsed).Add(rs.Warmup)
			if r.mon != nil {
				r.mon.MarkMeasure(start, start.Add(rs.Duration))
			}
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
	stats := r.lab.Emulator().Stats()
	if r.lastBytes == nil {
		r.lastBytes = map[string]uint64{}
	}
	el := now.Sub(r.lastAt).Seconds()
	best, bestPct := "", -1.0
	for _, d := range stats {
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
	out := ""
	if best != "" {
		out = fmt.Sprintf("busiest link %s %.1f%%", best, bestPct)
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

func (r *run) catchUpTimeout() time.Duration {
	var worst time.Duration
	for _, l := range r.s.Links {
		worst = max(worst, l.Forward.Delay+l.Reverse.Delay)
	}
	return 30*time.Second + 20*worst + r.s.Scheme.Refresh
}

func (r *run) fillDriver() {
	res := r.res
	s := r.sum
	s.Complete, s.StopReason = res.Complete, res.StopReason
	s.Mode, s.Users, s.TargetRate, s.MeasureSeconds = res.Mode, res.Users, res.TargetRate, res.MeasureSeconds
	s.TPM, s.TPS, s.Transactions, s.RowsChanged = res.TPM, res.TPS, res.Transactions, res.RowsChanged
	s.Errors, s.Retries, s.CommitLatency, s.Types = res.Errors, res.Retries, res.CommitLatency, res.Types
	s.BehindScheduleMs, s.Skipped = res.BehindScheduleMs, res.Skipped
	// The lag sample actually used (chosen by the driver when automatic).
	for _, rep := range s.Replicas {
		rep.SampleEvery = res.LagSampleEvery
		if res.LagSampleAuto {
			rep.SampleBudgetPerS = res.LagBudgetPerS
		}
	}
}

// newReplica is a replica's summary before the driver ran: the lag
// sample as the spec states it (SampleEvery 0 until an automatic one is
// chosen).
func (r *run) newReplica(site string) *report.Replica {
	rep := &report.Replica{Site: site, SampleEvery: r.s.Run.LagSample, Sample: "fixed"}
	if r.s.Run.LagSample == spec.LagSampleAuto {
		rep.Sample, rep.SampleBudgetPerS = "auto", driver.DefaultLagBudget
	}
	return rep
}

func (r *run) fillLag() {
	r.lagHist = map[string]*hdrhistogram.Histogram{}
	results := r.probe.Results()
	for name, rep := range r.sum.Replicas {
		lr, ok := results[name]
		if !ok {
			continue
		}
		rep.LagMs = stats.Percentiles{
			Count: lr.LagMs.Count, Mean: lr.LagMs.MeanMs, P50: lr.LagMs.P50Ms, P90: lr.LagMs.P90Ms,
			P95: lr.LagMs.P95Ms, P99: lr.LagMs.P99Ms, P999: lr.LagMs.P999Ms, Max: lr.LagMs.MaxMs,
		}
		rep.NotVisibleAtEnd = lr.NotVisibleAtEnd
		rep.Tracked = lr.Tracked
		rep.ResolutionMs = lr.ResolutionMs
		rep.PollP99Ms = lr.PollP99Ms
		rep.Polls, rep.FloorMs, rep.WindowHits = lr.Polls, lr.FloorMs, lr.WindowHits
		rep.VisibleBeforeWatch = lr.VisibleBeforeWatch
		r.lagHist["lag_"+name] = lr.Histogram
	}
}

// writeAll writes one measurement's results into dir.
func (r *run) writeAll(dir *report.Dir, sum *report.Summary) error {
	var errs []error
	if r.res != nil {
		errs = append(errs, dir.WriteSeries(r.res.Series))
		hists := map[string]*hdrhistogram.Histogram{"commit_latency": r.res.Hist}
		for name, t := range r.res.Types {
			hists["type_"+name] = t.Hist()
		}
		for k, h := range r.lagHist {
			hists[k] = h
		}
		errs = append(errs, dir.WriteHistLog("latency.hlog", hists))
	}
	if r.probe != nil {
		errs = append(errs, r.writeLagSeries(dir))
	}
	if sum.Environment.Kernel == "" {
		sum.Environment = report.CaptureEnvironment(r.opt.Version, "")
	}
	errs = append(errs, dir.WriteJSON("environment.json", sum.Environment))
	errs = append(errs, dir.WriteJSON("resolved-spec.json", r.s))
	errs = append(errs, dir.WriteJSON("summary.json", sum))
	return errors.Join(errs...)
}

func (r *run) writeLagSeries(dir *report.Dir) error {
	var b strings.Builder
	b.WriteString("t_s,replica,observed,lag_p50_ms,lag_p99_ms,lag_max_ms\n")
	results := r.probe.Results()
	reps := make([]string, 0, len(results))
	for n := range results {
		reps = append(reps, n)
	}
	sort.Strings(reps)
	for _, n := range reps {
		for _, s := range results[n].Series {
			fmt.Fprintf(&b, "%d,%s,%d,%.3f,%.3f,%.3f\n", s.Second, n, s.Count, s.P50Ms, s.P99Ms, s.MaxMs)
		}
	}
	return os.WriteFile(dir.File("lag.csv"), []byte(b.String()), 0o644)
}

// stopMonitor stops this measurement's monitors and puts their summary of
// the measure phase into r.sum: bytes and utilization per link direction,
// bytes on the wire per committed transaction, CPU and I/O wait per node
// and process role, the engine's replication state and a verdict per
// replica. Safe to call again.
func (r *run) stopMonitor() {
	if r.mon == nil {
		return
	}
	ms, err := r.mon.Stop()
	r.mon = nil
	if err != nil {
		fmt.Fprintf(r.log, "warning: %v\n", err)
	}
	for _, w := range ms.Warnings {
		fmt.Fprintf(r.log, "warning: monitors: %s\n", w)
	}
	s := r.sum
	s.Links, s.Roles, s.Replication, s.Verdicts = ms.Links, ms.Roles, ms.Replicas, ms.Verdicts
	s.IOWaitMeasured = ms.IOWaitMeasured
	s.Monitor = &report.MonitorInfo{IntervalS: ms.IntervalS, IOWaitNote: ms.IOWaitNote, Cost: ms.Cost, Warnings: ms.Warnings}
	if r.res != nil {
		s.BytesPerTransaction = ms.BytesPerTransaction(r.res.Transactions)
	}
	for name, rep := range s.Replicas {
		if rs, ok := ms.Replicas[name]; ok {
			rep.EngineReplayLagMs = rs.ReplayLagMs
			rep.EngineBytesBehind = rs.BytesBehindMax
		}
	}
}
