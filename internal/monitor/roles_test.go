package monitor

import (
	"errors"
	"math"
	"os"
	"strconv"
	"testing"
	"time"

	"replab/internal/engine"
)

// fakeProcs is a /proc: stat by PID, changed between samples.
type fakeProcs map[int]ProcStat

func (f fakeProcs) read(pid, _ int) (ProcStat, error) {
	s, ok := f[pid]
	if !ok {
		return ProcStat{}, errors.New("no such process")
	}
	return s, nil
}

func TestRoleTracker(t *testing.T) {
	const startTicks = 1000 // the monitor started 10 s after boot
	t0 := time.Unix(0, 0)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	tr := newRoleTracker(startTicks, 100, 4096)
	procs := fakeProcs{
		// Running before the monitor: counts from its first reading.
		10: {PID: 10, StartTime: 500, UTime: 5000, STime: 100, BlkioTicks: 70, RSSPages: 100},
		// A walsender that starts during the run: counts from zero.
		11: {PID: 11, StartTime: 1050, UTime: 30, STime: 20, BlkioTicks: 5, RSSPages: 10},
	}
	list := func(roles map[int]string) []engine.Process {
		var out []engine.Process
		for pid, role := range roles {
			out = append(out, engine.Process{Node: "p1", Role: role, PID: pid})
		}
		return out
	}

	p1 := tr.observe(sec(0), list(map[int]string{10: "startup"}), procs.read)
	if g := p1.roles[roleKey{"p1", "startup"}]; g.cum != (roleCum{}) || g.pids != 1 || g.rss != 100*4096 {
		t.Errorf("first sample of a process running before the monitor: %+v, want zero counters, 1 pid, rss 409600", g)
	}

	procs[10] = ProcStat{PID: 10, StartTime: 500, UTime: 5090, STime: 110, BlkioTicks: 75, RSSPages: 120}
	p2 := tr.observe(sec(1), list(map[int]string{10: "startup", 11: "walsender"}), procs.read)
	if g := p2.roles[roleKey{"p1", "startup"}]; g.cum != (roleCum{user: 90, sys: 10, blkio: 5}) {
		t.Errorf("startup after one second: %+v", g.cum)
	}
	if g := p2.roles[roleKey{"p1", "walsender"}]; g.cum != (roleCum{user: 30, sys: 20, blkio: 5}) {
		t.Errorf("a process started during the run counts from zero: %+v", g.cum)
	}

	// 11 exits; its PID is reused by a new backend; 10 changes role.
	procs[11] = ProcStat{PID: 11, StartTime: 1300, UTime: 7, STime: 3}
	procs[10] = ProcStat{PID: 10, StartTime: 500, UTime: 5100, STime: 110, BlkioTicks: 75}
	p3 := tr.observe(sec(2), list(map[int]string{10: "walreceiver", 11: "backend"}), procs.read)
	want := map[roleKey]roleGauge{
		{"p1", "startup"}:     {cum: roleCum{user: 90, sys: 10, blkio: 5}}, // kept, no process left
		{"p1", "walsender"}:   {cum: roleCum{user: 30, sys: 20, blkio: 5}}, // exited
		{"p1", "walreceiver"}: {cum: roleCum{user: 10}, pids: 1},           // 10's last second
		{"p1", "backend"}:     {cum: roleCum{user: 7, sys: 3}, pids: 1},    // a new process on a reused PID
	}
	for k, w := range want {
		if g := p3.roles[k]; g != w {
			t.Errorf("%v: %+v, want %+v", k, g, w)
		}
	}
	if len(p3.roles) != len(want) {
		t.Errorf("roles %v", p3.roles)
	}

	// A process that vanished between listing and reading is skipped.
	p4 := tr.observe(sec(3), list(map[int]string{99: "backend"}), procs.read)
	if g := p4.roles[roleKey{"p1", "backend"}]; g.pids != 0 || g.cum.user != 7 {
		t.Errorf("vanished process: %+v", g)
	}

	t.Run("summary: deltas over the phase, interpolated between samples", func(t *testing.T) {
		pts := []rolePoint{p1, p2, p3, p4}
		// [0.5 s, 1.5 s]: half of the first second, half of the second.
		s := summarizeRoles(pts, t0.Add(500*time.Millisecond), t0.Add(1500*time.Millisecond), 100, nil)
		st := s["p1"]["startup"]
		if !near(st.CPUUserS, 0.45+0) || !near(st.CPUSysS, 0.05) || !near(st.IOWaitS, 0.025) || !near(st.CPUS, 0.5) {
			t.Errorf("startup %+v", st)
		}
		if !near(st.CPUCores, 0.5) || st.Processes != 1 || st.RSSPeakBytes != 120*4096 {
			t.Errorf("startup %+v: want 0.5 cores, 1 process, rss peak of the sample inside the phase", st)
		}
		if wr := s["p1"]["walreceiver"]; !near(wr.CPUUserS, 0.05) {
			t.Errorf("walreceiver %+v", wr)
		}
		// The new backend used 0.1 s somewhere in (1 s, 2 s]: half of it
		// falls in the phase, and no process of it was alive at a sample
		// inside the phase.
		if b := s["p1"]["backend"]; !near(b.CPUS, 0.05) || b.Processes != 0 {
			t.Errorf("backend %+v", b)
		}
	})
}

// Threads of one process (MariaDB) each read the process's resident set:
// it counts once, in the main thread's role, or else in the first listed
// thread's; CPU stays per thread.
func TestRoleTrackerThreadsCountMemoryOnce(t *testing.T) {
	stats := map[[2]int]ProcStat{
		{7, 7}: {PID: 7, StartTime: 10, UTime: 1, RSSPages: 1000},
		{7, 8}: {PID: 7, StartTime: 10, UTime: 2, RSSPages: 1000},
		{7, 9}: {PID: 7, StartTime: 10, UTime: 3, RSSPages: 1000},
		{5, 6}: {PID: 5, StartTime: 10, UTime: 4, RSSPages: 200},
		{5, 4}: {PID: 5, StartTime: 10, UTime: 5, RSSPages: 200},
	}
	read := func(pid, tid int) (ProcStat, error) { return stats[[2]int{pid, tid}], nil }
	procs := []engine.Process{
		{Node: "m", Role: "connection", PID: 7, TID: 8},
		{Node: "m", Role: "innodb", PID: 7, TID: 9},
		{Node: "m", Role: "server", PID: 7, TID: 7}, // the main thread, listed last
		{Node: "r", Role: "replica-io", PID: 5, TID: 6},
		{Node: "r", Role: "replica-sql", PID: 5, TID: 4},
	}
	pt := newRoleTracker(0, 100, 4096).observe(time.Unix(0, 0), procs, read)
	want := map[roleKey]int64{
		{"m", "server"}: 1000 * 4096, {"m", "connection"}: 0, {"m", "innodb"}: 0,
		{"r", "replica-io"}: 200 * 4096, {"r", "replica-sql"}: 0,
	}
	for k, w := range want {
		if g := pt.roles[k]; g.rss != w || g.pids != 1 {
			t.Errorf("%v: rss %d, %d threads; want %d, 1", k, g.rss, g.pids, w)
		}
	}
}

// The kernel charges a task that slept on I/O across the switch-on of
// delay accounting about the machine's uptime: a reading that grew by
// more than the time elapsed (per thread) is discarded and counted.
func TestRoleTrackerDiscardsImpossibleIOWait(t *testing.T) {
	t0 := time.Unix(0, 0)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	stats := map[[2]int]ProcStat{
		{7, 8}: {PID: 7, StartTime: 10, BlkioTicks: 100},
		{9, 0}: {PID: 9, StartTime: 10, NumThreads: 4, BlkioTicks: 100},
	}
	read := func(pid, tid int) (ProcStat, error) { return stats[[2]int{pid, tid}], nil }
	procs := []engine.Process{{Node: "m", Role: "innodb", PID: 7, TID: 8}, {Node: "p", Role: "backend", PID: 9}}
	tr := newRoleTracker(1000, 100, 4096)
	tr.observe(sec(0), procs, read)
	// One second: a thread may wait 100 ticks, a 4-thread process 400.
	stats[[2]int{7, 8}] = ProcStat{PID: 7, StartTime: 10, BlkioTicks: 1457144} // + 14570 s: the kernel's quirk
	stats[[2]int{9, 0}] = ProcStat{PID: 9, StartTime: 10, NumThreads: 4, BlkioTicks: 450}
	p2 := tr.observe(sec(1), procs, read)
	if g := p2.roles[roleKey{"m", "innodb"}]; g.cum.blkio != 0 {
		t.Errorf("innodb I/O wait %d ticks after one second, want the jump discarded", g.cum.blkio)
	}
	if g := p2.roles[roleKey{"p", "backend"}]; g.cum.blkio != 350 {
		t.Errorf("backend I/O wait %d ticks: 3.5 s over 4 threads in one second is possible, want 350", g.cum.blkio)
	}
	stats[[2]int{7, 8}] = ProcStat{PID: 7, StartTime: 10, BlkioTicks: 1457194}
	p3 := tr.observe(sec(2), procs, read)
	if g := p3.roles[roleKey{"m", "innodb"}]; g.cum.blkio != 50 || tr.blkioDiscarded != 1 {
		t.Errorf("innodb %d ticks, %d discarded; want 50 from the new base, 1", g.cum.blkio, tr.blkioDiscarded)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// BenchmarkObserve is the monitor's own share of a sample: one
// /proc/PID/stat read and parse per process, for 30 real processes.
func BenchmarkObserve(b *testing.B) {
	ents, _ := os.ReadDir("/proc")
	var procs []engine.Process
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && len(procs) < 30 {
			procs = append(procs, engine.Process{Node: "n", Role: "r" + strconv.Itoa(len(procs)%5), PID: pid})
		}
	}
	tr := newRoleTracker(bootTicks(100), 100, 4096)
	r := statReader{root: "/proc"}
	for b.Loop() {
		tr.observe(time.Now(), procs, r.read)
	}
	b.ReportMetric(float64(len(procs)), "processes")
}

func TestParseIO(t *testing.T) {
	r, w := parseIO([]byte("rchar: 9000\nwchar: 800\nsyscr: 12\nsyscw: 7\nread_bytes: 4096\nwrite_bytes: 81920\ncancelled_write_bytes: 0\n"))
	if r != 4096 || w != 81920 {
		t.Errorf("read %d, write %d bytes; want 4096 and 81920 (not rchar, wchar: those count sockets and the page cache)", r, w)
	}
}

// The storage I/O a role caused counts like its CPU: from the first
// reading of a process already running, from zero for one started since,
// and over the measure phase in the summary.
func TestRoleTrackerCountsDiskBytes(t *testing.T) {
	t0 := time.Unix(0, 0)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	tr := newRoleTracker(1000, 100, 4096)
	procs := fakeProcs{
		10: {PID: 10, StartTime: 500, ReadBytes: 1 << 20, WriteBytes: 1 << 30}, // before the monitor
		11: {PID: 11, StartTime: 1050, WriteBytes: 8192},                       // since
	}
	list := []engine.Process{{Node: "p1", Role: "checkpointer", PID: 10}, {Node: "p1", Role: "backend", PID: 11}}
	var pts []rolePoint
	pts = append(pts, tr.observe(sec(0), list, procs.read))
	procs[10] = ProcStat{PID: 10, StartTime: 500, ReadBytes: 1<<20 + 4096, WriteBytes: 1<<30 + 65536}
	procs[11] = ProcStat{PID: 11, StartTime: 1050, WriteBytes: 8192 + 16384}
	pts = append(pts, tr.observe(sec(1), list, procs.read))
	sum := summarizeRoles(pts, sec(0), sec(1), 100, nil)
	if c := sum["p1"]["checkpointer"]; c.DiskReadBytes != 4096 || c.DiskWriteBytes != 65536 {
		t.Errorf("checkpointer: read %d, wrote %d bytes; want 4096 and 65536", c.DiskReadBytes, c.DiskWriteBytes)
	}
	// The backend's first 8 KiB were written before the phase (it counts
	// from zero, and the phase starts at its first sample).
	if b := sum["p1"]["backend"]; b.DiskWriteBytes != 16384 {
		t.Errorf("backend wrote %d bytes in the phase, want 16384", b.DiskWriteBytes)
	}
}
