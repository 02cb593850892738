// Package monitor samples a running lab once a second: every link
// direction's counters, every database process's CPU, I/O wait and memory
// by node and role, and the engine's replication state per replica. It
// writes roles.csv and replication.csv into the results directory and
// summarises the measure phase, with a one-line verdict per replica (bound
// by CPU, I/O or the network, or keeping up).
package monitor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"replab/internal/engine"
	"replab/internal/lab"
	"replab/internal/linkem/emu"
)

// Cluster is what the monitor asks of an engine; engine.Cluster is one.
type Cluster interface {
	Nodes() []engine.Node
	Processes(ctx context.Context) ([]engine.Process, error)
	ReplicationState(ctx context.Context) ([]engine.ReplicaState, error)
}

// Config says what to monitor.
type Config struct {
	// Lab gives the link counters (Lab.Emulator()) and the sites' CPU
	// limits. Links, when set, replaces Lab.Emulator() (tests).
	Lab   *lab.Lab
	Links Links
	// Cluster gives the processes and replication state; nil monitors
	// links only.
	Cluster Cluster
	// Dir is the results directory; roles.csv and replication.csv are
	// written there ("" writes no files). links.csv is the lab's.
	Dir string
	// Interval between samples; default 1 s.
	Interval time.Duration
	// Epoch is time zero of the CSV files' t_s; default the monitor's start.
	Epoch time.Time
	// Now is the clock that stamps and schedules samples; default time.Now.
	Now func() time.Time

	procRoot      string // default "/proc"
	delayAcctPath string // default DelayAcctPath
	delayAcctLock string // default DelayAcctLockDir
	// newTimer makes the timers that wake the samplers, stopped; default
	// real ones. Tests pass timers of their own clock with Now, so that
	// they decide when each sample is taken.
	newTimer func() timer
}

// timer is what the samplers need of a time.Timer.
type timer interface {
	C() <-chan time.Time
	// Reset makes the timer fire d from now (at once when d <= 0),
	// dropping a value not received yet.
	Reset(d time.Duration)
	Stop()
}

type realTimer struct{ t *time.Timer }

func newRealTimer() timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return realTimer{t}
}

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }

// File names in the results directory.
const (
	RolesFile       = "roles.csv"
	ReplicationFile = "replication.csv"
)

// RolesHeader is the header of roles.csv: one row per sample and per
// (node, role) seen so far in the run. Counters are cumulative since the
// monitor started, so a chart takes differences between rows (rows are
// about Interval apart; extra rows at the measure phase's boundaries):
//
//	t_s         seconds since Config.Epoch (default: the monitor's start)
//	node        the database node, or NODE/storage for the processes of
//	            its storage (StorageNodeSuffix)
//	role        the process role (backend, walsender, walreceiver, startup,
//	            checkpointer, walwriter, bgwriter, logical-apply, …)
//	pid_count   processes of the role alive at the sample
//	cpu_user_s  CPU seconds in user mode (utime, /proc/PID/stat field 14)
//	cpu_sys_s   CPU seconds in kernel mode (stime, field 15)
//	io_wait_s   seconds waiting for block I/O (delayacct_blkio_ticks,
//	            field 42, kernel delay accounting); empty when not measured
//	rss_bytes   resident memory of the role's processes at the sample
//	            (field 24 × page size; shared pages count in every process)
//
// A process adds what it used between two samples to the role it has at
// the later one; one that started after the monitor counts from zero, one
// already running from its first sample. What a process uses after its
// last sample before it exits is not counted, nor are processes that live
// entirely between two samples (short connections, including the
// monitor's own replication queries).
const RolesHeader = "t_s,node,role,pid_count,cpu_user_s,cpu_sys_s,io_wait_s,rss_bytes"

// ReplicationHeader is the header of replication.csv: one row per sample
// and per replication stream, as the engine reports it
// (engine.Cluster.ReplicationState):
//
//	t_s            seconds since Config.Epoch, at the middle of the query
//	node           the replica
//	from           its upstream node(s)
//	kind           physical, logical, pglogical, … (the engine's)
//	state          the engine's word for the stream (streaming, catchup, …)
//	backlog        how far the replica trails, in backlog_unit
//	backlog_unit   bytes (PostgreSQL: WAL not yet replayed), transactions,
//	               write-sets
//	replay_lag_ms  the engine's replay-lag estimate (PostgreSQL:
//	               pg_stat_replication.replay_lag); empty when it has none
//	               (PostgreSQL leaves it empty when idle)
//	sync_state     async, sync, potential, quorum (PostgreSQL)
//	positions      the engine's positions, verbatim: name=value separated
//	               by spaces (PostgreSQL: sent_lsn, write_lsn, flush_lsn,
//	               replay_lsn)
//
// Results written before replab 0.2 have bytes_behind instead of backlog
// and backlog_unit, and one column per LSN; the report reads both.
const ReplicationHeader = "t_s,node,from,kind,state,backlog,backlog_unit,replay_lag_ms,sync_state,positions"

// Summary is the measure phase as the monitors saw it.
type Summary struct {
	MeasureS  float64 `json:"measure_s"`
	IntervalS float64 `json:"interval_s"`
	// IOWaitMeasured says whether io_wait_s figures are real: delay
	// accounting was on for the whole run. IOWaitNote says why not, or
	// that the monitor switched it on.
	IOWaitMeasured bool   `json:"io_wait_measured"`
	IOWaitNote     string `json:"io_wait_note,omitempty"`
	// Links by direction "a->b".
	Links map[string]LinkSummary `json:"links"`
	// Roles by node, then role.
	Roles map[string]map[string]RoleSummary `json:"roles"`
	// Replicas by node: the engine's replication state.
	Replicas map[string]ReplicaSummary `json:"replicas"`
	// Gauges by node, then name: the engine's own figures (engine.Gauger).
	Gauges map[string]map[string]GaugeSummary `json:"gauges,omitempty"`
	// Verdicts by replica node: see the Verdict constants.
	Verdicts map[string]string `json:"verdicts"`
	// Machine is the machine as a whole (machine.go); nil when its CPU
	// counters could not be read.
	Machine  *MachineSummary `json:"machine,omitempty"`
	Cost     Cost            `json:"cost"`
	Warnings []string        `json:"warnings,omitempty"`
}

// Cost is what monitoring itself took.
type Cost struct {
	Samples int `json:"samples"`
	// Per sample: the links, one Processes call, one /proc/PID/stat read
	// per process and the roles.csv rows. CPU is the sampling thread's.
	SampleCPUMeanMs  float64 `json:"sample_cpu_mean_ms"`
	SampleCPUMaxMs   float64 `json:"sample_cpu_max_ms"`
	SampleWallMeanMs float64 `json:"sample_wall_mean_ms"`
	SampleWallMaxMs  float64 `json:"sample_wall_max_ms"`
	ProcessesMean    float64 `json:"processes_mean"`
	// The engine's Processes call alone (PostgreSQL scans /proc for the
	// postmasters' children), part of the sample's wall time.
	ProcessesWallMeanMs float64 `json:"processes_wall_mean_ms"`
	// One ReplicationState call (it queries the servers).
	ReplicationSamples    int     `json:"replication_samples"`
	ReplicationWallMeanMs float64 `json:"replication_wall_mean_ms"`
	ReplicationWallMaxMs  float64 `json:"replication_wall_max_ms"`
}

// TotalBytes is every direction's delivered bytes in the measure phase:
// the bytes on the wire (a packet crossing two links counts twice). It
// includes client traffic when clients sit in another site than the
// nodes they use.
func (s Summary) TotalBytes() uint64 {
	var b uint64
	for _, l := range s.Links {
		b += l.Bytes
	}
	return b
}

// BytesPerTransaction is TotalBytes per committed transaction; 0 without
// transactions.
func (s Summary) BytesPerTransaction(committed int64) float64 {
	if committed <= 0 {
		return 0
	}
	return float64(s.TotalBytes()) / float64(committed)
}

// Monitor is a running set of samplers. Fields above mu are set before
// the samplers start or owned by one sampler goroutine; those below it
// are shared.
type Monitor struct {
	cfg      Config
	links    Links
	interval time.Duration
	now      func() time.Time
	hz       uint64
	reader   statReader
	roles    *roleTracker
	nodes    []engine.Node

	ioWait     bool
	ioNote     string
	releaseIO  func()
	rolesCSV   *csvFile
	machCSV    *csvFile
	replCSV    *csvFile
	gaugesCSV  *csvFile
	markc      chan struct{}
	stopc      chan struct{}
	done       chan struct{}
	replDone   chan struct{}
	stopOnce   sync.Once
	sum        Summary
	stopErr    error
	sampleCtx  context.Context
	cancelCtx  context.CancelFunc
	failures   map[string]*failure
	costSample []sampleCost
	lateSeen   map[string]*emu.LateHist // each direction's lateness histogram at the previous sample

	mu           sync.Mutex
	t0           time.Time
	last         time.Time // latest sample
	measureStart time.Time
	measureEnd   time.Time
	bounds       []time.Time // boundary samples still to take
	linkPts      map[string][]linkPoint
	rolePts      []rolePoint
	replPts      []replPoint
	gaugePts     []gaugePoint
	machinePts   []machinePoint
	replCost     []time.Duration
	ioLost       bool  // delay accounting went off during the run
	committed    int64 // transactions the sources committed in the phase (SetCommitted)
}

type failure struct {
	n     int
	first error
}

type sampleCost struct {
	cpu, wall, procWall time.Duration
	procs               int
}

// Start takes a first sample and keeps sampling every Interval until ctx
// ends or Stop is called. It switches the kernel's delay accounting on if
// it is off (and Stop restores it).
func Start(ctx context.Context, cfg Config) (*Monitor, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.newTimer == nil {
		cfg.newTimer = newRealTimer
	}
	if cfg.procRoot == "" {
		cfg.procRoot = "/proc"
	}
	if cfg.delayAcctPath == "" {
		cfg.delayAcctPath = DelayAcctPath
	}
	if cfg.delayAcctLock == "" {
		cfg.delayAcctLock = DelayAcctLockDir
	}
	m := &Monitor{
		cfg: cfg, links: cfg.Links, interval: cfg.Interval, now: cfg.Now, hz: clockTicks(),
		reader: statReader{root: cfg.procRoot},
		markc:  make(chan struct{}, 1), stopc: make(chan struct{}), done: make(chan struct{}), replDone: make(chan struct{}),
		failures: map[string]*failure{}, linkPts: map[string][]linkPoint{}, lateSeen: map[string]*emu.LateHist{},
	}
	if m.links == nil && cfg.Lab != nil && cfg.Lab.Emulator() != nil {
		m.links = cfg.Lab.Emulator() // an offline lab has none
	}
	if cfg.Cluster != nil {
		m.nodes = cfg.Cluster.Nodes()
	}
	if cfg.Dir != "" {
		var err error
		if m.rolesCSV, err = createCSV(filepath.Join(cfg.Dir, RolesFile), RolesHeader); err != nil {
			return nil, err
		}
		if m.replCSV, err = createCSV(filepath.Join(cfg.Dir, ReplicationFile), ReplicationHeader); err != nil {
			m.rolesCSV.close()
			return nil, err
		}
		if m.machCSV, err = createCSV(filepath.Join(cfg.Dir, MachineFile), MachineHeader); err != nil {
			m.rolesCSV.close()
			m.replCSV.close()
			return nil, err
		}
		if _, ok := cfg.Cluster.(engine.Gauger); ok {
			if m.gaugesCSV, err = createCSV(filepath.Join(cfg.Dir, GaugesFile), GaugesHeader); err != nil {
				m.rolesCSV.close()
				m.replCSV.close()
				m.machCSV.close()
				return nil, err
			}
		}
	}
	m.ioWait, m.ioNote, m.releaseIO = enableDelayAcct(cfg.delayAcctPath, cfg.delayAcctLock)
	m.t0 = m.now()
	if m.cfg.Epoch.IsZero() {
		m.cfg.Epoch = m.t0
	}
	m.roles = newRoleTracker(bootTicks(m.hz), m.hz, int64(os.Getpagesize()))
	m.sampleCtx, m.cancelCtx = context.WithCancel(ctx)
	ready := make(chan struct{})
	go m.loop(ready)
	<-ready // the baseline sample is taken
	go m.replLoop()
	return m, nil
}

// SetCommitted tells the monitor how many transactions the sources
// committed in the measure phase, before Stop: a replica's backlog then
// counts as growing from a tenth of them (LagGrowthMin), so a slow
// workload's growing backlog is seen too.
func (m *Monitor) SetCommitted(n int64) {
	m.mu.Lock()
	m.committed = n
	m.mu.Unlock()
}

// MarkMeasure sets the measure phase, the only part the summary covers
// (default: from the first to the last sample). Boundaries still ahead
// get a sample of their own; past ones are interpolated between the
// samples around them. Safe to call from any goroutine, more than once.
func (m *Monitor) MarkMeasure(start, end time.Time) {
	m.mu.Lock()
	m.measureStart, m.measureEnd = start, end
	m.bounds = m.bounds[:0]
	for _, b := range []time.Time{start, end} {
		if b.After(m.last) {
			m.bounds = append(m.bounds, b)
		}
	}
	m.mu.Unlock()
	select {
	case m.markc <- struct{}{}:
	default:
	}
}

// Stop takes a last sample, stops sampling, restores delay accounting,
// closes the CSV files and returns the summary. The error reports CSV
// files that could not be written. Later calls return the same.
func (m *Monitor) Stop() (Summary, error) {
	m.stopOnce.Do(func() {
		close(m.stopc)
		<-m.done
		<-m.replDone
		m.cancelCtx()
		m.releaseIO()
		var errs []error
		for _, f := range []*csvFile{m.rolesCSV, m.replCSV, m.gaugesCSV, m.machCSV} {
			if err := f.close(); err != nil {
				errs = append(errs, err)
			}
		}
		m.stopErr = errors.Join(errs...)
		m.sum = m.summarize()
	})
	return m.sum, m.stopErr
}

// loop samples on the interval grid and at the measure boundaries. It
// runs on a locked OS thread so the thread's CPU time is its cost.
func (m *Monitor) loop(ready chan<- struct{}) {
	defer close(m.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m.sample() // the baseline
	close(ready)
	next := m.t0.Add(m.interval)
	timer := m.cfg.newTimer()
	defer timer.Stop()
	for {
		due := next
		m.mu.Lock()
		for _, b := range m.bounds {
			if b.Before(due) {
				due = b
			}
		}
		m.mu.Unlock()
		timer.Reset(due.Sub(m.now()))
		select {
		case <-m.sampleCtx.Done():
			return
		case <-m.stopc:
			m.sample()
			return
		case <-m.markc:
			continue
		case <-timer.C():
		}
		now := m.sample()
		for !next.After(now) {
			next = next.Add(m.interval)
		}
	}
}

// sample reads every link and process once and returns its time.
func (m *Monitor) sample() time.Time {
	w0, c0 := time.Now(), threadCPU()
	now := m.now()
	var dirs []linkPointNamed
	if m.links != nil {
		for _, d := range m.links.Stats() {
			name := d.From + "->" + d.To
			prev := m.lateSeen[name]
			if prev == nil {
				prev = new(emu.LateHist)
				m.lateSeen[name] = prev
			}
			dirs = append(dirs, linkPointNamed{name, newLinkPoint(now, d, prev)})
		}
	}
	var procs []engine.Process
	var procWall time.Duration
	if m.cfg.Cluster != nil {
		ctx, cancel := context.WithTimeout(m.sampleCtx, m.interval)
		var err error
		p0 := time.Now()
		procs, err = m.cfg.Cluster.Processes(ctx)
		procWall = time.Since(p0)
		cancel()
		if err != nil {
			m.fail("list processes", err)
		}
	}
	if m.cfg.Lab != nil {
		procs = append(procs, storageProcesses(m.cfg.Lab)...)
	}
	pt := m.roles.observe(now, procs, m.reader.read)
	ioLost := m.ioWait && !delayAcctOn(m.cfg.delayAcctPath)
	mp := machinePoint{t: now, c: readCPUTicks(m.cfg.procRoot)}

	m.mu.Lock()
	var prevMach *machinePoint
	if n := len(m.machinePts); n > 0 {
		prevMach = &m.machinePts[n-1]
	}
	var machRow string
	if prevMach != nil {
		if iv, ok := intervalOf(*prevMach, mp, runtime.NumCPU(), m.hz); ok {
			cores := float64(runtime.NumCPU())
			machRow = fmt.Sprintf("%s,%.3f,%.3f,%.3f\n", m.ts(now), iv.busy*cores, iv.steal*cores, iv.replabCores)
		}
	}
	m.machinePts = append(m.machinePts, mp)
	for _, d := range dirs {
		m.linkPts[d.name] = append(m.linkPts[d.name], d.p)
	}
	m.rolePts = append(m.rolePts, pt)
	m.last = now
	kept := m.bounds[:0]
	for _, b := range m.bounds {
		if b.After(now) {
			kept = append(kept, b)
		}
	}
	m.bounds = kept
	m.ioLost = m.ioLost || ioLost
	m.mu.Unlock()

	if m.rolesCSV != nil {
		ts := m.ts(now)
		for _, k := range sortedRoles(pt.roles) {
			g := pt.roles[k]
			io := ""
			if m.ioWait {
				io = fmt.Sprintf("%.2f", float64(g.cum.blkio)/float64(m.hz))
			}
			m.rolesCSV.printf("%s,%s,%s,%d,%.2f,%.2f,%s,%d\n", ts, k.node, k.role, g.pids,
				float64(g.cum.user)/float64(m.hz), float64(g.cum.sys)/float64(m.hz), io, g.rss)
		}
		m.rolesCSV.flush()
	}
	if m.machCSV != nil && machRow != "" {
		m.machCSV.printf("%s", machRow)
		m.machCSV.flush()
	}
	m.costSample = append(m.costSample, sampleCost{cpu: time.Duration(threadCPU() - c0), wall: time.Since(w0), procs: len(procs), procWall: procWall})
	return now
}

type linkPointNamed struct {
	name string
	p    linkPoint
}

// replLoop reads the engine's replication state every interval. It is a
// goroutine of its own because it queries the servers, which may be slow.
func (m *Monitor) replLoop() {
	defer close(m.replDone)
	if m.cfg.Cluster == nil {
		return
	}
	// On the interval grid from the monitor's start, like a ticker: a
	// tick missed while a slow query ran is dropped.
	next := m.t0.Add(m.interval)
	tk := m.cfg.newTimer()
	defer tk.Stop()
	for {
		tk.Reset(next.Sub(m.now()))
		select {
		case <-m.sampleCtx.Done():
			return
		case <-m.stopc:
			return
		case <-tk.C():
		}
		ctx, cancel := context.WithTimeout(m.sampleCtx, 2*m.interval)
		w0, t0 := time.Now(), m.now()
		rows, err := m.cfg.Cluster.ReplicationState(ctx)
		m.sampleGauges(ctx, t0)
		cancel()
		wall, t1 := time.Since(w0), m.now()
		for !next.After(t1) {
			next = next.Add(m.interval)
		}
		if err != nil {
			if m.sampleCtx.Err() == nil {
				m.fail("read replication state", err)
			}
			continue
		}
		t := t0.Add(t1.Sub(t0) / 2)
		m.mu.Lock()
		m.replPts = append(m.replPts, replPoint{t: t, rows: rows})
		m.replCost = append(m.replCost, wall)
		m.mu.Unlock()
		if m.replCSV != nil {
			ts := m.ts(t)
			for _, r := range rows {
				lag := ""
				if r.ReplayLagMs >= 0 {
					lag = fmt.Sprintf("%.3f", r.ReplayLagMs)
				}
				var pos []string
				for _, p := range r.Positions {
					pos = append(pos, p.Name+"="+p.Value)
				}
				m.replCSV.printf("%s,%s,%s,%s,%s,%d,%s,%s,%s,%s\n", ts, csvField(r.Node), csvField(r.From), csvField(r.Kind), csvField(r.State),
					r.Backlog, csvField(r.BacklogUnit), lag, csvField(r.SyncState), csvField(strings.Join(pos, " ")))
			}
			m.replCSV.flush()
		}
	}
}

func (m *Monitor) ts(t time.Time) string {
	return fmt.Sprintf("%.3f", t.Sub(m.cfg.Epoch).Seconds())
}

func (m *Monitor) fail(what string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.failures[what]
	if f == nil {
		f = &failure{first: err}
		m.failures[what] = f
	}
	f.n++
}

// window is the measure phase clipped to the samples taken.
func (m *Monitor) window() (start, end time.Time) {
	start, end = m.t0, m.last
	if !m.measureStart.IsZero() {
		start = maxTime(m.measureStart, m.t0)
		end = minTime(m.measureEnd, m.last)
	}
	return start, end
}

func (m *Monitor) summarize() Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	start, end := m.window()
	s := Summary{
		IntervalS: m.interval.Seconds(), IOWaitMeasured: m.ioWait && !m.ioLost, IOWaitNote: m.ioNote,
		Links: map[string]LinkSummary{}, Verdicts: map[string]string{},
	}
	if m.ioLost {
		s.IOWaitNote = "I/O wait incomplete: delay accounting was switched off by someone else during the run"
	}
	if end.After(start) {
		s.MeasureS = end.Sub(start).Seconds()
	} else {
		s.Warnings = append(s.Warnings, "no samples inside the measure phase: nothing to summarise")
	}
	for name, pts := range m.linkPts {
		s.Links[name] = summarizeLink(pts, start, end, m.interval/2)
	}
	s.Roles = summarizeRoles(m.rolePts, start, end, m.hz, m.roles.apply)
	s.Replicas = summarizeReplication(m.replPts, start, end, m.committed)
	s.Gauges = summarizeGauges(m.gaugePts, start, end)
	var serverCores float64
	for _, roles := range s.Roles {
		for _, r := range roles {
			serverCores += r.CPUCores
		}
	}
	s.Machine = summarizeMachine(m.machinePts, start, end, runtime.NumCPU(), m.hz, serverCores)
	m.verdicts(&s)
	s.Cost = m.cost()
	if n := m.roles.blkioDiscarded; n > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("I/O wait: %d readings discarded that grew by more than the time elapsed (a task asleep on I/O when kernel.task_delayacct was switched on is charged about the machine's uptime)", n))
	}
	whats := make([]string, 0, len(m.failures))
	for w := range m.failures {
		whats = append(whats, w)
	}
	sort.Strings(whats)
	for _, w := range whats {
		f := m.failures[w]
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s failed %d times, first: %v", w, f.n, f.first))
	}
	return s
}

// verdicts judges every replica: a node with an upstream (Node.From) or
// one the engine reported replication state for.
func (m *Monitor) verdicts(s *Summary) {
	byName := map[string]engine.Node{}
	upstreams := map[string]map[string]bool{}
	add := func(node, from string) {
		if upstreams[node] == nil {
			upstreams[node] = map[string]bool{}
		}
		if from != "" {
			upstreams[node][from] = true
		}
	}
	for _, n := range m.nodes {
		byName[n.Name] = n
		if n.From != "" {
			add(n.Name, n.From)
		}
	}
	for node, r := range s.Replicas {
		if _, ok := byName[node]; !ok && len(m.nodes) > 0 {
			continue // a stream the engine could not map to a node
		}
		for _, f := range strings.Split(r.From, ",") {
			add(node, f)
		}
	}
	for node, ups := range upstreams {
		in := verdictInput{measureS: s.MeasureS, ioWait: s.IOWaitMeasured, apply: map[string]RoleSummary{}}
		for role, rs := range s.Roles[node] {
			in.nodeCores += rs.CPUCores
			if rs.Apply {
				in.apply[role] = rs
			}
		}
		if r, ok := s.Replicas[node]; ok {
			in.replica = &r
		}
		site := byName[node].Site
		if m.cfg.Lab != nil {
			if st := m.cfg.Lab.Site(site); st != nil && st.CPUCores > 0 {
				in.siteCores = st.CPUCores
			}
		}
		for up := range ups {
			upSite := byName[up].Site
			if m.links == nil || site == "" || upSite == "" || upSite == site {
				continue
			}
			fwd, back := m.links.Path(upSite, site), m.links.Path(site, upSite)
			var rtt time.Duration
			for i := 1; i < len(fwd); i++ {
				name := fwd[i-1] + "->" + fwd[i]
				in.path = append(in.path, pathDir{name: name, link: s.Links[name]})
				rtt += time.Duration(s.Links[name].DelayMs * 1e6)
			}
			for i := 1; i < len(back); i++ {
				rtt += time.Duration(s.Links[back[i-1]+"->"+back[i]].DelayMs * 1e6)
			}
			in.rtt = max(in.rtt, rtt)
		}
		s.Verdicts[node] = verdict(in)
	}
}

func (m *Monitor) cost() Cost {
	var c Cost
	var cpu, wall, procWall time.Duration
	procs := 0
	for _, sc := range m.costSample {
		c.Samples++
		cpu += sc.cpu
		wall += sc.wall
		procWall += sc.procWall
		procs += sc.procs
		c.SampleCPUMaxMs = max(c.SampleCPUMaxMs, ms(sc.cpu))
		c.SampleWallMaxMs = max(c.SampleWallMaxMs, ms(sc.wall))
	}
	if c.Samples > 0 {
		c.SampleCPUMeanMs = ms(cpu) / float64(c.Samples)
		c.SampleWallMeanMs = ms(wall) / float64(c.Samples)
		c.ProcessesMean = float64(procs) / float64(c.Samples)
		c.ProcessesWallMeanMs = ms(procWall) / float64(c.Samples)
	}
	var rw time.Duration
	for _, d := range m.replCost {
		c.ReplicationSamples++
		rw += d
		c.ReplicationWallMaxMs = max(c.ReplicationWallMaxMs, ms(d))
	}
	if c.ReplicationSamples > 0 {
		c.ReplicationWallMeanMs = ms(rw) / float64(c.ReplicationSamples)
	}
	return c
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// threadCPU is the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// StorageNodeSuffix marks the processes of a node's storage
// (docs/storage.md) in roles.csv and the summary: node "p1/storage" holds
// p1's nbdkit, nbdfuse, sshfs and sftp-server, apart from the node's own
// server so that they count in no verdict about it.
const StorageNodeSuffix = "/storage"

func storageProcesses(l *lab.Lab) []engine.Process {
	var out []engine.Process
	for _, p := range l.StorageProcesses() {
		out = append(out, engine.Process{Node: p.Node + StorageNodeSuffix, Role: p.Name, PID: p.PID})
	}
	return out
}
