package monitor

import (
	"math"
	"sort"
	"time"

	"replab/internal/engine"
)

// RoleSummary is one process role on one node over the measure phase: the
// GoldenGate study's "CPU time / user I/O wait" row for a session type.
type RoleSummary struct {
	CPUUserS float64 `json:"cpu_user_s"` // CPU seconds in user mode
	CPUSysS  float64 `json:"cpu_sys_s"`  // CPU seconds in kernel mode
	CPUS     float64 `json:"cpu_s"`      // user + system
	// IOWaitS is time spent waiting for block I/O (kernel delay
	// accounting), in seconds; 0 when Summary.IOWaitMeasured is false.
	IOWaitS float64 `json:"io_wait_s"`
	// CPUCores is CPUS / measure seconds: average cores in use.
	CPUCores float64 `json:"cpu_cores"`
	// RSSPeakBytes is the largest sum of the role's resident sets at one
	// sample. Shared memory counts in every process that touched it, so
	// for PostgreSQL this overstates private memory. Where roles are
	// threads of one process (MariaDB, a JVM) the process's resident set
	// counts once, in its main thread's role; the other roles show 0.
	RSSPeakBytes int64 `json:"rss_peak_bytes"`
	// DiskReadBytes and DiskWriteBytes are the storage I/O the role's
	// processes caused in the phase (/proc/PID/io: what reached or came
	// from the block layer, not socket traffic or reads from the page
	// cache).
	DiskReadBytes  int64 `json:"disk_read_bytes"`
	DiskWriteBytes int64 `json:"disk_write_bytes"`
	// Processes is the largest number of the role's processes (or
	// threads) alive at one sample.
	Processes int `json:"processes"`
	// Apply: the engine says the role receives or applies changes at a
	// replica, so its CPU or I/O wait can bound the replica.
	Apply bool `json:"apply,omitempty"`
}

// roleKey names a role on a node.
type roleKey struct{ node, role string }

func (k roleKey) less(o roleKey) bool {
	if k.node != o.node {
		return k.node < o.node
	}
	return k.role < o.role
}

// roleCum is a role's cumulative counters (clock ticks) since the monitor
// started.
type roleCum struct{ user, sys, blkio, rbytes, wbytes uint64 }

// roleGauge is a role at one sample: cumulative counters and the processes
// alive then.
type roleGauge struct {
	cum  roleCum
	pids int
	rss  int64 // bytes
}

// rolePoint is every role at one sample.
type rolePoint struct {
	t     time.Time
	roles map[roleKey]roleGauge
}

// procKey identifies a process (or a thread of it) across PID reuse.
type procKey struct {
	pid, tid int
	start    uint64
}

type procState struct {
	last ProcStat
	seen int       // sample number when last listed
	at   time.Time // when last read
}

// roleTracker turns per-process counters (cumulative since each process
// started) into per-role counters cumulative since the monitor started:
// each process adds what it used between two samples to the role it has
// at the later one. A process that started after the monitor counts from
// zero; one that was already running counts from its first reading.
// A process that exits loses what it used after its last sample.
type roleTracker struct {
	startTicks uint64 // monitor start, clock ticks since boot
	hz         uint64 // clock ticks per second
	pageSize   int64
	first      time.Time // the first sample
	// blkioDiscarded counts I/O wait readings that grew by more than the
	// time elapsed allows (see observe).
	blkioDiscarded int
	procs          map[procKey]*procState
	cum            map[roleKey]roleCum
	apply          map[roleKey]bool // roles the engine marked Apply
	n              int              // samples taken
}

func newRoleTracker(startTicks, hz uint64, pageSize int64) *roleTracker {
	return &roleTracker{startTicks: startTicks, hz: hz, pageSize: pageSize, procs: map[procKey]*procState{}, cum: map[roleKey]roleCum{}, apply: map[roleKey]bool{}}
}

// observe takes one sample: the processes (or threads) listed and their
// stat lines (read fails for one that has exited; it is skipped).
func (r *roleTracker) observe(t time.Time, procs []engine.Process, read func(pid, tid int) (ProcStat, error)) rolePoint {
	r.n++
	if r.first.IsZero() {
		r.first = t
	}
	pt := rolePoint{t: t, roles: map[roleKey]roleGauge{}}
	// A thread's stat line gives its whole process's resident set: count
	// it once, under the main thread's role (TID = PID) when it is listed,
	// else under the first listed thread's.
	mainListed, rssCounted := map[int]bool{}, map[int]bool{}
	for _, p := range procs {
		if p.TID != 0 && p.TID == p.PID {
			mainListed[p.PID] = true
		}
	}
	for _, p := range procs {
		st, err := read(p.PID, p.TID)
		if err != nil {
			continue
		}
		k := roleKey{p.Node, p.Role}
		if p.Apply {
			r.apply[k] = true
		}
		pk := procKey{p.PID, p.TID, st.StartTime}
		ps := r.procs[pk]
		if ps == nil {
			ps = &procState{}
			if st.StartTime <= r.startTicks {
				ps.last = st // running before the monitor: count from now
			} // else from zero: it started since
			r.procs[pk] = ps
		}
		c := r.cum[k]
		c.user += sub(st.UTime, ps.last.UTime)
		c.sys += sub(st.STime, ps.last.STime)
		if d := sub(st.BlkioTicks, ps.last.BlkioTicks); d <= r.blkioBound(t, ps, p.TID, st) {
			c.blkio += d
		} else {
			r.blkioDiscarded++
		}
		c.rbytes += sub(st.ReadBytes, ps.last.ReadBytes)
		c.wbytes += sub(st.WriteBytes, ps.last.WriteBytes)
		r.cum[k] = c
		ps.last, ps.seen, ps.at = st, r.n, t
		g := pt.roles[k]
		g.pids++
		if p.TID == 0 || (!rssCounted[p.PID] && (p.TID == p.PID || !mainListed[p.PID])) {
			g.rss += st.RSSPages * r.pageSize
			rssCounted[p.PID] = true
		}
		pt.roles[k] = g
	}
	for pk, ps := range r.procs {
		if ps.seen != r.n {
			delete(r.procs, pk)
		}
	}
	// Every role seen so far appears in every point, so series stay
	// continuous after a role's last process exits.
	for k, c := range r.cum {
		g := pt.roles[k]
		g.cum = c
		pt.roles[k] = g
	}
	return pt
}

// blkioBound is the most I/O wait a task can have added since it was last
// read: the time elapsed, once per thread. The kernel can add more: a
// task that went to sleep on I/O while kernel.task_delayacct was off and
// wakes after it was switched on (by this monitor, or by another program)
// is charged from a start of zero, about the machine's uptime. Such a
// reading is discarded rather than reported as hours of I/O wait.
func (r *roleTracker) blkioBound(t time.Time, ps *procState, tid int, st ProcStat) uint64 {
	since := ps.at
	if since.IsZero() {
		since = r.first.Add(-time.Second) // counting from zero: it started after the monitor
	}
	threads := int64(1)
	if tid == 0 {
		threads = max(st.NumThreads, 1)
	}
	return uint64(t.Sub(since).Seconds()*float64(r.hz)*float64(threads)) + 2 // tick rounding
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// sortedRoles lists a point's roles by node, then role.
func sortedRoles(m map[roleKey]roleGauge) []roleKey {
	keys := make([]roleKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].less(keys[j]) })
	return keys
}

// summarizeRoles computes every role's summary over [start, end]; hz is
// clock ticks per second. Roles with no process and no use in the phase
// are left out.
func summarizeRoles(pts []rolePoint, start, end time.Time, hz uint64, apply map[roleKey]bool) map[string]map[string]RoleSummary {
	out := map[string]map[string]RoleSummary{}
	if len(pts) == 0 || !end.After(start) {
		return out
	}
	ts := make([]time.Time, len(pts))
	keys := map[roleKey]bool{}
	for i, p := range pts {
		ts[i] = p.t
		for k := range p.roles {
			keys[k] = true
		}
	}
	secs := end.Sub(start).Seconds()
	for k := range keys {
		at := func(t time.Time, f func(c roleCum) uint64) float64 {
			return interp(ts, func(i int) float64 { return float64(f(pts[i].roles[k].cum)) }, t)
		}
		delta := func(f func(c roleCum) uint64) float64 {
			return round(max(at(end, f)-at(start, f), 0)/float64(hz), 3)
		}
		rs := RoleSummary{Apply: apply[k]}
		rs.CPUUserS = delta(func(c roleCum) uint64 { return c.user })
		rs.CPUSysS = delta(func(c roleCum) uint64 { return c.sys })
		rs.CPUS = round(rs.CPUUserS+rs.CPUSysS, 3)
		rs.IOWaitS = delta(func(c roleCum) uint64 { return c.blkio })
		rs.CPUCores = round(rs.CPUS/secs, 4)
		rs.DiskReadBytes = int64(max(at(end, func(c roleCum) uint64 { return c.rbytes })-at(start, func(c roleCum) uint64 { return c.rbytes }), 0))
		rs.DiskWriteBytes = int64(max(at(end, func(c roleCum) uint64 { return c.wbytes })-at(start, func(c roleCum) uint64 { return c.wbytes }), 0))
		for _, p := range pts {
			if p.t.Before(start) || p.t.After(end) {
				continue
			}
			g := p.roles[k]
			rs.Processes = max(rs.Processes, g.pids)
			rs.RSSPeakBytes = max(rs.RSSPeakBytes, g.rss)
		}
		if rs.Processes == 0 && rs.CPUS == 0 && rs.IOWaitS == 0 && rs.DiskReadBytes == 0 && rs.DiskWriteBytes == 0 {
			continue
		}
		if out[k.node] == nil {
			out[k.node] = map[string]RoleSummary{}
		}
		out[k.node][k.role] = rs
	}
	return out
}

// round rounds v to digits decimals: figures in summary.json need not
// carry interpolation noise finer than a clock tick resolves.
func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}
