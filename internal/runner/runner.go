// Package runner is `replab run`: it builds the lab and the engine's
// scheme, creates and loads the workload's data, runs the driver with a
// lag watcher per replica, checks that replicas caught up, writes the
// results directory and tears everything down. It knows no engine: what
// it needs of one it finds as a capability (package engine).
package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/lab"
	"replab/internal/lagprobe"
	"replab/internal/livemetrics"
	"replab/internal/monitor"
	"replab/internal/report"
	"replab/internal/spec"
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
	// Offline builds the lab without namespaces and links (lab.Options):
	// for engines that run in-process, in tests without root.
	Offline bool
	// Metrics, when set, serves live metrics on this address ("host:port")
	// for the whole run; it overrides [run] metrics. MetricsReady is told
	// the address it listens on (port 0 picks one).
	Metrics      string
	MetricsReady func(addr string)

	live *livemetrics.Metrics // nil: no live metrics
}

// Run executes the spec: one measurement, repetitions of it, or a sweep
// of either. The results directory is written even when the run fails or
// is interrupted, with complete = false. For a sweep the summary returned
// is nil (see sweep.json).
func Run(ctx context.Context, s *spec.Spec, opt Options) (*report.Summary, string, error) {
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	// The driver's progress, the engine, faults and monitors write to the
	// log from goroutines of their own: one lock for all of them (an
	// engine's own LockedWriter is this one).
	opt.Log = enginekit.NewLockedWriter(opt.Log)
	if err := Validate(s, opt.Engines, opt.Workloads, true); err != nil {
		return nil, "", err
	}
	for _, w := range s.Warnings() {
		fmt.Fprintf(opt.Log, "warning: %s\n", w)
	}
	eng, wl, err := check(s, opt, true)
	if err != nil {
		return nil, "", err
	}
	closeMetrics, err := startMetrics(s, &opt)
	if err != nil {
		return nil, "", err
	}
	defer closeMetrics()
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

// Validate checks a spec before anything is built: the spec, its engine
// part and its workload where it has them, and with a sweep every point
// too; what they warn of is in s.Warnings(), a point's naming it. It
// reports every error at once, also for a spec read with errors
// (spec.LoadForCheck): its own come out sorted by line with the engine's
// and the workload's, and a sweep point repeats none of those. forRun also
// requires what replab run needs: an engine and a workload.
func Validate(s *spec.Spec, engines *engine.Registry, workloads *workload.Registry, forRun bool) error {
	opt := Options{Engines: engines, Workloads: workloads}
	read := s.ReadErrors()
	base := s.NewErrors()
	base.Join(read)
	base.Join(checkPartial(s, opt, forRun, len(read) > 0))
	baseErr := base.Err()
	errs := []error{baseErr}
	if len(s.Sweep) > 0 {
		known := map[string]bool{}
		if list, ok := baseErr.(spec.ErrorList); ok {
			for _, e := range list {
				known[e.Error()] = true
			}
		}
		points, err := s.PointsForCheck()
		errs = append(errs, err)
		for _, p := range points {
			pread := p.Spec.ReadErrors()
			perrs := p.Spec.NewErrors()
			perrs.Join(pread)
			perrs.Join(checkPartial(p.Spec, opt, forRun, len(read) > 0 || len(pread) > 0))
			if err := perrs.Err(); err != nil {
				errs = append(errs, withoutKnown(&spec.PointError{Label: p.Label, Err: err}, known))
			}
			for _, w := range p.Spec.Warnings() {
				pw := *w
				pw.Msg += " (sweep point " + p.Label + ")"
				s.AddWarning(&pw)
			}
		}
	}
	return errors.Join(errs...)
}

// checkPartial is check's error; on a spec read with errors, a panic of
// an engine's or a workload's check (which may expect what could not be
// read) is no more than those errors.
func checkPartial(s *spec.Spec, opt Options, forRun, partial bool) (err error) {
	if partial {
		defer func() {
			if recover() != nil {
				err = nil
			}
		}()
	}
	_, _, err = check(s, opt, forRun)
	return err
}

// withoutKnown drops from err (an ErrorList or a PointError) the errors
// already reported about the spec itself: a sweep point would repeat
// every error about what it does not sweep.
func withoutKnown(err error, known map[string]bool) error {
	if err == nil || len(known) == 0 {
		return err
	}
	switch x := err.(type) {
	case spec.ErrorList:
		var out spec.ErrorList
		for _, e := range x {
			if !known[e.Error()] {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case *spec.PointError:
		if inner := withoutKnown(x.Err, known); inner != nil {
			return &spec.PointError{Label: x.Label, Err: inner}
		}
		return nil
	}
	return err
}

// check finds the spec's engine and workload, and reports every error of
// both at once; forRun requires both.
func check(s *spec.Spec, opt Options, forRun bool) (engine.Engine, workload.Workload, error) {
	errs := s.NewErrors()
	eng, err := opt.Engines.For(s)
	errs.Join(err)
	if forRun && eng == nil && err == nil {
		errs.Add("engine", "replab run needs [engine], [node.NAME] and [workload] tables; for a network-only lab use `replab lab check`")
	}
	var wl workload.Workload
	if eng != nil || err != nil {
		var dialect engine.Dialect
		if eng != nil {
			dialect = engine.DialectOf(eng)
		} else if e, ok := opt.Engines.Get(s.Engine.Kind); ok {
			dialect = engine.DialectOf(e) // the engine refused the spec: still check the workload
		}
		wl, err = opt.Workloads.For(s, dialect)
		errs.Join(err)
		if forRun && wl == nil && err == nil {
			errs.Add("workload", `replab run needs a [workload] table, e.g. kind = "personnel"`)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, nil, err
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
	if rs.Search != nil {
		return r.search(ctx, dir)
	}
	if rs.LinkSearch != nil {
		return r.linkSearch(ctx, dir)
	}
	return r.measureInto(ctx, dir)
}

// measureInto measures the lab as it is into dir: once, or repeated when
// the spec asks for repetitions or a confidence target. A run, a
// search's step or probe and a link search's probe each measure so.
func (r *run) measureInto(ctx context.Context, dir *report.Dir) (*report.Summary, error) {
	if r.s.Run.Repetitions <= 1 && r.s.Run.Confidence == 0 {
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
	fast     bool             // built and loaded over unshaped links (provision)
	stamps   engine.LagStamps // nil: lag cannot be measured on this cluster
	stampSQL string           // the SQL a tracked transaction runs
	setupS   float64
	loaded   *report.Load
	env      report.Environment
	measured int // measurements so far

	// byPosition: the replicas whose lag is measured by commit position,
	// with what their position is (lagmethod.go); the others read stamps.
	byPosition map[string]string

	probe   *lagprobe.Probe
	mon     *monitor.Monitor // this measurement's monitors, until stopMonitor
	res     *driver.Result
	lagHist map[string]*hdrhistogram.Histogram
	// found are this measurement's journal keys found at some node after
	// it (verification); nil when no node was read.
	found map[enginekit.AckKey]bool

	probeStarted time.Time        // when the probe's lag series begins
	monStarted   time.Time        // when the monitors' series begin
	faults       *faults          // this measurement's fault schedule; nil without one
	conflicts    *conflictCount   // the cluster's own conflict counts; nil without
	opAcks       *workload.OpAcks // this measurement's key-value puts' journal; nil without

	lastBytes map[string]uint64 // for the progress line
	lastAt    time.Time

	// phaseMu guards the measure phase's window, set from the driver's
	// first progress report.
	phaseMu            sync.Mutex
	phaseFrom, phaseTo time.Time
}

// setup builds the lab and the cluster, creates the schema and loads the
// data once for every measurement of this point.
func (r *run) setup(ctx context.Context) (err error) {
	start := time.Now()
	r.opt.live.Phase("setup")
	if r.s.Target != nil {
		return r.setupTarget(ctx, start)
	}
	fmt.Fprintf(r.log, "lab %s: building %d sites and %d links\n", r.s.Lab.Name, len(r.s.Sites), len(r.s.Links))
	r.lab, err = lab.Up(ctx, r.s, lab.Options{StateRoot: r.opt.StateRoot, DataRoot: r.opt.DataRoot, Log: r.log,
		SeriesCSV: r.seriesCSV(), Offline: r.opt.Offline, CaptureDir: r.dir.Path})
	if err != nil {
		return err
	}
	r.metricsLinks()
	if err := r.unshapeForSetup(); err != nil {
		return err
	}
	r.cluster, err = r.eng.Up(ctx, r.lab, r.log)
	if err != nil {
		return fmt.Errorf("engine %s: %w", r.eng.Kind(), err)
	}
	// replab fault node … from a second shell, while the run holds the
	// cluster.
	r.lab.SetNodeControl(NodesOf(r.eng.Kind(), r.cluster))
	return r.prepare(ctx, start)
}

// writableWithin bounds the wait for a node that takes writes before the
// load: an HA manager on a starved machine can lose its leader for a few
// seconds and elect one again (Patroni's TTL is 5 s in the HA tests).
const writableWithin = 30 * time.Second

// waitWritable waits until a node takes writes, for up to writableWithin,
// saying so; r.nodes and r.sources are then the cluster's.
func (r *run) waitWritable(ctx context.Context) error {
	fmt.Fprintf(r.log, "waiting for a node to take writes (none does now)\n")
	deadline := time.Now().Add(writableWithin)
	for len(r.sources) == 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("engine %s: no node takes writes (waited %s)", r.eng.Kind(), writableWithin)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		r.nodes = r.cluster.Nodes()
		r.sources = engine.Sources(r.nodes)
	}
	return nil
}

// prepare finds the cluster's sources, replicas and lag stamps, creates
// the schema, loads the data and applies the links: setup once the
// cluster is there.
func (r *run) prepare(ctx context.Context, start time.Time) (err error) {
	r.nodes = r.cluster.Nodes()
	if len(r.nodes) > 0 {
		r.env = report.CaptureEnvironment(r.opt.Version, r.nodes[0].Version)
	}
	r.sources = engine.Sources(r.nodes)
	if len(r.sources) == 0 {
		if err := r.waitWritable(ctx); err != nil {
			return err
		}
	}
	r.replicas = engine.Replicas(r.nodes)
	r.client = r.clientSite()
	r.setTrafficClasses()
	if r.stamps, r.stampSQL, err = enginekit.StampsOf(r.cluster); err != nil {
		if len(r.replicas) > 0 {
			fmt.Fprintf(r.log, "warning: %v\n", err)
		}
		r.stamps = nil
	}
	r.chooseLagMethods()
	if err := r.createSchema(ctx); err != nil {
		return err
	}
	if ld, ok := r.cluster.(interface{ Loads() bool }); !ok || ld.Loads() {
		if err := r.load(ctx, r.sources[0]); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(r.log, "using the data in the existing tables as it is (nothing loaded)\n")
	}
	if err := r.shapeForMeasuring(ctx); err != nil {
		return err
	}
	r.setupS = time.Since(start).Seconds()
	return nil
}

// unshapeForSetup takes the links out of the way while the lab is built
// and loaded, when provision says so.
func (r *run) unshapeForSetup() error {
	est := CopyEstimates(r.s, r.eng, r.wl)
	if r.opt.Offline || !provisionFast(r.s, est) {
		return nil
	}
	r.fast = true
	why := `provision = "fast"`
	if w, ok := slowestCopy(est); ok && r.s.Run.Provision == spec.ProvisionAuto {
		why = w.describe()
	}
	fmt.Fprintf(r.log, "links: unshaped while the lab is built and loaded (%s); the configured conditions apply when the measurement starts (provision = \"link\" copies across them)\n", why)
	return r.lab.Unshape()
}

// shapeForMeasuring waits until every replica has what setup made over the
// unshaped links, then applies the configured ones.
func (r *run) shapeForMeasuring(ctx context.Context) error {
	if !r.fast {
		return nil
	}
	if err := r.cluster.WaitFlowing(ctx); err != nil {
		return err
	}
	if err := r.lab.Shape(); err != nil {
		return err
	}
	fmt.Fprintf(r.log, "links: the configured conditions from now on\n")
	return nil
}

// seriesCSV is where the lab writes per-second link counters; none for an
// offline lab (it has no links).
func (r *run) seriesCSV() string {
	if r.opt.Offline {
		return ""
	}
	return r.dir.File("links.csv")
}

// createSchema creates the workload's tables, with the lag probe's when
// the cluster's stamps are the SQL ones.
func (r *run) createSchema(ctx context.Context) error {
	sc, ok := r.cluster.(engine.SQL)
	if !ok {
		return nil
	}
	schema := r.wl.Schema()
	if _, own := r.cluster.(engine.LagStamps); !own && r.stamps != nil {
		schema.Tables = append(schema.Tables, enginekit.LagTable())
	}
	if r.s.VerifyOn() {
		schema.Tables = append(schema.Tables, enginekit.AckTable())
	}
	if err := sc.ApplySchema(ctx, schema); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	return nil
}

// teardown stops the cluster and removes the lab.
func (r *run) teardown() error {
	if r.lab == nil {
		if r.cluster != nil {
			return r.cluster.Close() // a target: replab's schema goes
		}
		return nil
	}
	fmt.Fprintf(r.log, "lab %s: tearing down\n", r.s.Lab.Name)
	if r.cluster != nil {
		r.lab.SetNodeControl(nil)
		_ = r.cluster.Close()
		// Before the lab's data goes: what the managers decided is only
		// in their logs.
		if lk, ok := r.cluster.(engine.LogKeeper); ok && r.dir != nil {
			if err := lk.KeepLogs(r.dir.File("logs")); err != nil {
				fmt.Fprintf(r.log, "warning: keeping the servers' logs: %v\n", err)
			}
		}
	}
	if err := r.lab.Close(); err != nil {
		return fmt.Errorf("teardown: %w", err)
	}
	return nil
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
	r.probe = lagprobe.New(lagprobe.Config{Writers: r.s.Run.Users, Interval: r.s.Run.LagInterval, OnLag: r.opt.live.OnLag()})
	r.opt.live.Run(r.s.Lab.Name, r.eng.Kind(), r.wl.Name())
	r.probeStarted = time.Now() // second 0 of the lag series, for placing faults
	if r.stamps != nil {
		if err := r.stamps.ResetLag(ctx, r.s.Run.Users); err != nil {
			return r.sum, fmt.Errorf("reset lag stamps: %w", err)
		}
	}
	fmt.Fprintf(r.log, "waiting for every replica to have the data\n")
	if err := r.cluster.WaitFlowing(ctx); err != nil {
		return r.sum, err
	}

	stopWatch, err := r.watch(ctx)
	if err != nil {
		return r.sum, err
	}
	defer stopWatch()

	// Monitors: links, processes by role and the engine's replication
	// state, sampled into dir (roles.csv, replication.csv). Started just
	// before the driver, so their t_s is close to series.csv's.
	r.monStarted = time.Now() // replication.csv's t_s 0, for placing faults
	r.mon, err = monitor.Start(ctx, monitor.Config{Lab: r.lab, Cluster: r.cluster, Dir: dir.Path})
	if err != nil {
		return r.sum, err
	}
	defer r.stopMonitor() // early returns; a no-op after the call below

	types := r.wl.Transactions()
	var pools driver.Pools
	var nodeOf func(*sql.DB) string
	if !workload.OpsOnly(types) {
		t, n, closePools, err := r.pools(ctx)
		if err != nil {
			return r.sum, err
		}
		defer closePools()
		pools, nodeOf = t, n
	}
	if cn, ok := r.wl.(workload.Connector); ok {
		r.opAcks = r.kvJournal()
		env := workload.ConnectEnv{Cluster: r.cluster, Nodes: r.nodes, Dial: r.dialer(), Users: r.s.Run.Users, SiteDo: r.siteDo(), Acks: r.opAcks}
		if err := cn.Connect(ctx, env); err != nil {
			return r.sum, fmt.Errorf("workload %s: connect from site %s: %w", r.wl.Name(), r.client, err)
		}
		defer cn.Close()
	}
	cfg := r.driverConfig()
	if err := r.readFence(&cfg, types); err != nil {
		return r.sum, err
	}
	if len(r.s.Clients) > 0 && workload.OpsOnly(types) {
		return r.sum, fmt.Errorf("[[client]] groups run SQL transactions; the %s workload's operations hold their own connections from one site: use [run] client", r.wl.Name())
	}
	r.clientConfig(&cfg)
	hist, err := r.startHistory(dir, &cfg, nodeOf)
	if err != nil {
		return r.sum, err
	}
	mode := fmt.Sprintf("%d users", cfg.Users)
	if cfg.RatePerSec > 0 {
		mode = fmt.Sprintf("open loop at %.2f/s (%d connections)", cfg.RatePerSec, cfg.Users)
	}
	fmt.Fprintf(r.log, "running %s %s against %s: warmup %s, measure %s, cooldown %s\n",
		mode, r.describeClients(), names(r.sources), cfg.Warmup, cfg.Duration, cfg.Cooldown)
	r.faults = r.startFaults(ctx)
	r.conflicts = r.startConflictCount(ctx)
	driverStart := time.Now()
	own := startOwnCPU()
	r.res, err = driver.Run(ctx, cfg, types, pools)
	r.checkReserve(own)
	if r.opt.Live {
		fmt.Fprintln(r.log)
	}
	if hist != nil {
		// Checked last, on every way out: after the catch-up and the
		// verification, which the check's CPU would disturb.
		herr := hist.Close()
		defer func() { r.checkHistory(ctx, dir, herr) }()
	}
	events := append(r.faults.stop(), r.shellFaults(driverStart)...)
	if err != nil {
		_ = r.fillFaults(dir, events) // the log of what was done, without measures
		return r.sum, err
	}
	r.fillDriver()
	r.fillClients()
	if r.res.FenceErrors > 0 {
		fmt.Fprintf(r.log, "warning: %d writes without a commit position for the reads after them to wait for; the first: %s\n", r.res.FenceErrors, r.res.FenceError)
	}
	if pr, ok := r.wl.(workload.PageReporter); ok {
		r.phaseMu.Lock()
		from, to := r.phaseFrom, r.phaseTo
		r.phaseMu.Unlock()
		if r.sum.Pages, err = pr.PageReport(dir.Path, from, to); err != nil {
			return r.sum, fmt.Errorf("pages.csv: %w", err)
		}
	}
	stopped := time.Now()

	// Replicas catch up; then stop watching.
	r.opt.live.Phase("catch-up")
	defer r.opt.live.Phase("done")
	if len(r.replicas) > 0 && (r.stamps != nil || len(r.byPosition) > 0) && ctx.Err() == nil {
		fmt.Fprintf(r.log, "waiting for replicas to catch up\n")
		cctx, cancel := context.WithTimeout(ctx, r.catchUpTimeout())
		if err := r.probe.WaitCaughtUp(cctx); err != nil {
			fmt.Fprintf(r.log, "warning: replicas did not catch up within %s: %v\n", r.catchUpTimeout(), err)
		}
		cancel()
	}
	r.waitRedundant(ctx)
	werr := stopWatch()
	r.stopMonitor() // after the catch-up, so replication.csv shows it
	r.fillLag()
	// After the catch-up: a fault's lag and backlog peaks may come late (a
	// standby started at the end of the run catches up then).
	if err := r.fillFaults(dir, events); err != nil {
		return r.sum, fmt.Errorf("faults.csv: %w", err)
	}
	r.sum.Steady = steadiness(r.res.Series)
	if r.res.Complete {
		r.sum.SyncFallbacks = r.fallbacks()
		r.sum.ReplicationConflicts = r.conflicts.result(ctx, r.res.MeasureSeconds+r.s.Run.Cooldown.Seconds())
		r.sum.Convergence = r.checkConvergence(ctx, stopped)
		r.sum.Verification = r.checkAcks(ctx, stopped)
	}
	if err := r.fillHA(dir); err != nil {
		return r.sum, fmt.Errorf("%s: %w", report.NodeRolesFile, err)
	}
	if !r.res.Complete {
		return r.sum, errors.New(r.res.StopReason)
	}
	return r.sum, werr
}

// watch starts a lag watcher per replica and waits until each has made
// its first poll (transactions already visible then would get no lag).
// The returned function stops them and returns their errors; it may be
// called more than once.
func (r *run) watch(ctx context.Context) (stop func() error, err error) {
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var readers []engine.LagReader
	var stamped []string // readers[i] watches stamped[i]
	var preaders []engine.PositionReader
	var watched []string
	var once sync.Once
	var joined error
	stop = func() error {
		once.Do(func() {
			cancel()
			wg.Wait()
			for i, rd := range readers {
				if lc := lagClock(rd); lc != nil && r.sum.Replicas[stamped[i]] != nil {
					r.sum.Replicas[stamped[i]].LagClock = lc
				}
				_ = rd.Close()
			}
			for _, pr := range preaders {
				_ = pr.Close()
			}
			joined = errors.Join(errs...)
		})
		return joined
	}
	for _, n := range r.replicas {
		if r.byPosition[n.Name] == "" {
			continue
		}
		r.sum.Replicas[n.Name] = r.newReplica(n.Name, n.Site)
		pr, err := r.watchPositions(ctx, wctx, n, &wg, func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() })
		if err != nil {
			_ = stop()
			return nil, err
		}
		preaders = append(preaders, pr)
		watched = append(watched, n.Name)
	}
	for _, n := range r.replicas {
		if r.stamps == nil || r.byPosition[n.Name] != "" {
			continue
		}
		rd, err := r.stamps.LagReader(ctx, n.Name)
		if err != nil {
			_ = stop()
			return nil, fmt.Errorf("lag reader at %s: %w", n.Name, err)
		}
		readers = append(readers, rd)
		stamped = append(stamped, n.Name)
		r.sum.Replicas[n.Name] = r.newReplica(n.Name, n.Site)
		opts := lagprobe.WatchOptions{Skip: r.ownWriters(n.Name)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.probe.WatchWith(wctx, n.Name, rd, opts); err != nil && wctx.Err() == nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("lag watcher at %s: %w", n.Name, err))
				mu.Unlock()
			}
		}()
		watched = append(watched, n.Name)
	}
	if len(watched) > 0 {
		if err := r.probe.WaitWatching(ctx, watched...); err != nil {
			_ = stop()
			return nil, fmt.Errorf("lag watchers: %w", err)
		}
	}
	return stop, nil
}

func (r *run) catchUpTimeout() time.Duration {
	t := 30*time.Second + 20*r.s.WorstRoundTrip()
	if rf, ok := r.cluster.(engine.Refresher); ok {
		t += rf.RefreshInterval() // snapshot replicas see changes at their next refresh
	}
	return t
}
