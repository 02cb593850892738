package monitor

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/linkem"
	"replab/internal/linkem/emu"
)

// fakeLab is two sites, a and b, with a 10 Mbit/s link carrying a steady
// 4 Mbit/s (40 %) a->b, and the return direction idle; 50 ms each way.
// Its counters grow with the fake clock, in whole bytes and packets.
type fakeLab struct {
	clk *fakeClock
	t0  time.Time
}

func (f *fakeLab) Stats() []emu.DirStats {
	ns := uint64(f.clk.Since(f.t0))
	p := linkem.Params{RateBps: 10_000_000, Delay: 50 * time.Millisecond}
	return []emu.DirStats{
		{From: "a", To: "b", Params: p, Counters: linkem.Counters{DeliveredBytes: ns * 500_000 / 1e9, DeliveredPackets: ns * 500 / 1e9}},
		{From: "b", To: "a", Params: p, Counters: linkem.Counters{DeliveredBytes: ns * 1000 / 1e9, DeliveredPackets: ns * 20 / 1e9}},
	}
}

func (f *fakeLab) Path(from, to string) []string { return []string{from, to} }

// fakeCluster is a primary p1 in site a streaming to r1 in site b, whose
// startup process burns one core and whose backlog grows 1 MB/s, on the
// fake clock. Its processes live in a fake /proc that Processes rewrites.
type fakeCluster struct {
	clk  *fakeClock
	t0   time.Time
	proc string
	mu   sync.Mutex
}

func (f *fakeCluster) Nodes() []engine.Node {
	return []engine.Node{{Name: "p1", Site: "a", Role: "primary"}, {Name: "r1", Site: "b", Role: "standby", From: "p1"}}
}

func (f *fakeCluster) Processes(ctx context.Context) ([]engine.Process, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ticks := uint64(f.clk.Since(f.t0) / (10 * time.Millisecond)) // USER_HZ = 100
	write := func(pid int, utime, stime, blkio uint64) {
		line := fmt.Sprintf("%d (postgres) S 1 %d %d 0 -1 4194560 0 0 0 0 %d %d 0 0 20 0 1 0 5 224382976 1000 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 %d 0 0 0 0 0 0 0 0 0 0\n",
			pid, pid, pid, utime, stime, blkio)
		dir := filepath.Join(f.proc, fmt.Sprint(pid))
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644)
	}
	write(100, ticks/10, ticks/20, 0)   // p1 walsender: 0.15 cores
	write(200, ticks*9/10, ticks/10, 0) // r1 startup: one core
	write(201, ticks/50, ticks/50, 0)   // r1 walreceiver
	return []engine.Process{
		{Node: "p1", Role: "walsender", PID: 100},
		{Node: "r1", Role: "startup", PID: 200, Apply: true},
		{Node: "r1", Role: "walreceiver", PID: 201, Apply: true},
	}, nil
}

func (f *fakeCluster) ReplicationState(ctx context.Context) ([]engine.ReplicaState, error) {
	el := f.clk.Since(f.t0)
	return []engine.ReplicaState{{Node: "r1", From: "p1", Kind: "physical", State: "streaming", Backlog: int64(el / time.Microsecond), BacklogUnit: engine.UnitBytes,
		ReplayLagMs: float64(el.Milliseconds()), Positions: []engine.Position{{Name: "replay_lsn", Value: "0/3000148"}}}}, nil
}

// TestMonitorWithFakes runs the monitor on a fake clock: every sample is
// taken exactly at its deadline, so the summary's figures are exact. The
// monitor samples every 50 ms from t0; the measure phase is [120 ms,
// 720 ms]; Stop comes at 870 ms.
func TestMonitorWithFakes(t *testing.T) {
	dir := t.TempDir()
	sysctl := filepath.Join(dir, "task_delayacct")
	if err := os.WriteFile(sysctl, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := newFakeClock(t0)
	cl := &fakeCluster{clk: clk, t0: t0, proc: filepath.Join(dir, "proc")}
	m, err := Start(context.Background(), Config{
		Links: &fakeLab{clk: clk, t0: t0}, Cluster: cl, Dir: dir, Interval: 50 * time.Millisecond, Now: clk.Now,
		procRoot: cl.proc, delayAcctPath: sysctl, delayAcctLock: dir, newTimer: clk.newTimer,
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := readSysctl(sysctl); v != "1" {
		t.Errorf("delay accounting %q during the run, want 1", v)
	}
	clk.waitArmed(t, 2) // the sample loop and the replication loop
	start := t0.Add(120 * time.Millisecond)
	end := start.Add(600 * time.Millisecond)
	clk.afterReset(t, func() { m.MarkMeasure(start, end) })
	clk.advance(t, end.Add(150*time.Millisecond))
	sum, err := m.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := readSysctl(sysctl); v != "0" {
		t.Errorf("delay accounting %q after the run, want it restored to 0", v)
	}
	if again, _ := m.Stop(); again.MeasureS != sum.MeasureS {
		t.Error("a second Stop returned another summary")
	}

	t.Run("samples are on the interval grid, at both boundaries and at Stop", func(t *testing.T) {
		var want []time.Duration
		for d := time.Duration(0); d <= 850*time.Millisecond; d += 50 * time.Millisecond {
			want = append(want, d)
			if d == 100*time.Millisecond {
				want = append(want, 120*time.Millisecond)
			}
			if d == 700*time.Millisecond {
				want = append(want, 720*time.Millisecond)
			}
		}
		want = append(want, 870*time.Millisecond)
		var got []time.Duration
		for _, p := range m.rolePts {
			got = append(got, p.t.Sub(t0))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("samples at %v\nwant        %v", got, want)
		}
	})
	t.Run("the measure phase is exactly the marked one", func(t *testing.T) {
		if sum.MeasureS != 0.6 || !sum.IOWaitMeasured || !strings.Contains(sum.IOWaitNote, "switched on") {
			t.Errorf("measure %v s, io wait measured %v (%q)", sum.MeasureS, sum.IOWaitMeasured, sum.IOWaitNote)
		}
	})
	t.Run("links: bytes and utilization of the phase", func(t *testing.T) {
		ab, ba := sum.Links["a->b"], sum.Links["b->a"]
		if ab.Bytes != 300_000 || ab.Packets != 300 || ab.UtilizationAvgPct == nil || *ab.UtilizationAvgPct != 40 ||
			ab.UtilizationPeakPct == nil || *ab.UtilizationPeakPct != 40 || ab.ThroughputAvgBps != 4_000_000 || ab.RateBps != 10_000_000 || ab.DelayMs != 50 {
			t.Errorf("a->b %+v, want 300000 bytes, 300 packets, 4 Mbit/s, 40 %%", ab)
		}
		if ba.Bytes != 600 || ba.Packets != 12 {
			t.Errorf("b->a %+v, want 600 bytes, 12 packets", ba)
		}
		if sum.TotalBytes() != 300_600 || sum.BytesPerTransaction(100) != 3006 {
			t.Errorf("total %d, per transaction %.1f", sum.TotalBytes(), sum.BytesPerTransaction(100))
		}
	})
	t.Run("roles: CPU by node and role", func(t *testing.T) {
		st := sum.Roles["r1"]["startup"]
		// 12 ticks at 120 ms, 72 at 720 ms; utime 9/10 and stime 1/10 of
		// them, rounded down: 10+1 and 64+7.
		if st.CPUUserS != 0.54 || st.CPUSysS != 0.06 || st.CPUS != 0.6 || st.CPUCores != 1 || st.Processes != 1 ||
			st.RSSPeakBytes != 1000*int64(os.Getpagesize()) || !st.Apply {
			t.Errorf("r1 startup %+v, want 0.54 + 0.06 s of CPU, one core", st)
		}
		if ws := sum.Roles["p1"]["walsender"]; ws.CPUS != 0.09 || ws.Apply {
			t.Errorf("p1 walsender %+v, want 0.09 s (1+0 ticks at 120 ms, 7+3 at 720 ms)", ws)
		}
	})
	t.Run("replication and verdict", func(t *testing.T) {
		// Replication samples every 50 ms: 150 … 700 ms are in the phase.
		r := sum.Replicas["r1"]
		if r.From != "p1" || r.Kind != "physical" || !r.LagGrows || r.ReplayLagMs == nil || r.Samples != 12 ||
			r.BacklogMax != 700_000 || math.Abs(r.BacklogGrowth-600_000) > 1e-6 {
			t.Errorf("r1 %+v", r)
		}
		if v := sum.Verdicts["r1"]; !strings.HasPrefix(v, VerdictCPU+" (startup") {
			t.Errorf("r1 verdict %q, want cpu-bound by startup", v)
		}
		if _, ok := sum.Verdicts["p1"]; ok {
			t.Errorf("the primary got a verdict: %v", sum.Verdicts)
		}
	})
	t.Run("cost is recorded", func(t *testing.T) {
		// 18 grid samples (0 … 850 ms), 2 boundaries, 1 at Stop; 17
		// replication samples (50 … 850 ms).
		c := sum.Cost
		if c.Samples != 21 || c.ProcessesMean != 3 || c.SampleWallMeanMs <= 0 || c.ReplicationSamples != 17 {
			t.Errorf("cost %+v", c)
		}
	})
	t.Run("CSV files have their headers and rows", func(t *testing.T) {
		roles := readCSV(t, filepath.Join(dir, RolesFile))
		if roles[0] != RolesHeader || len(roles) != 1+3*21 {
			t.Fatalf("roles.csv: %d lines, header %q", len(roles), roles[0])
		}
		if roles[1] != "0.000,p1,walsender,1,0.00,0.00,0.00,"+fmt.Sprint(1000*os.Getpagesize()) {
			t.Errorf("first roles.csv row %q", roles[1])
		}
		if last := roles[len(roles)-1]; last != "0.870,r1,walreceiver,1,0.01,0.01,0.00,"+fmt.Sprint(1000*os.Getpagesize()) {
			t.Errorf("last roles.csv row %q", last)
		}
		repl := readCSV(t, filepath.Join(dir, ReplicationFile))
		if repl[0] != ReplicationHeader || len(repl) != 1+17 {
			t.Fatalf("replication.csv: %d lines, header %q", len(repl), repl[0])
		}
		if repl[1] != "0.050,r1,p1,physical,streaming,50000,bytes,50.000,,replay_lsn=0/3000148" {
			t.Errorf("replication.csv row %q", repl[1])
		}
	})
}

func readCSV(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func TestDelayAcctSharedByMonitors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "task_delayacct")
	_ = os.WriteFile(path, []byte("0\n"), 0o644)
	// Each enable opens its own lock file description, as a monitor of
	// another process would: the flocks see two holders either way.
	ok1, _, rel1 := enableDelayAcct(path, dir)
	ok2, _, rel2 := enableDelayAcct(path, dir)
	if !ok1 || !ok2 {
		t.Fatal("not enabled")
	}
	rel1()
	rel1() // idempotent
	if v, _ := readSysctl(path); v != "1" {
		t.Errorf("after the first of two monitors stopped: %q, want still 1", v)
	}
	rel2()
	if v, _ := readSysctl(path); v != "0" {
		t.Errorf("after both stopped: %q, want 0 restored", v)
	}

	_ = os.WriteFile(path, []byte("1\n"), 0o644)
	_, note, rel := enableDelayAcct(path, dir)
	rel()
	if v, _ := readSysctl(path); v != "1" || note != "" {
		t.Errorf("already on: left %q, note %q; want 1 untouched and no note", v, note)
	}

	ok, note, rel := enableDelayAcct(filepath.Join(t.TempDir(), "missing", "task_delayacct"), dir)
	rel()
	if ok || !strings.Contains(note, "not measured") {
		t.Errorf("missing sysctl: ok %v, note %q", ok, note)
	}
}

// A monitor that switched accounting on and died (its flock gone with it)
// left its record: the next monitor to stop last restores the value.
func TestDelayAcctRestoredAfterADeadHolder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "task_delayacct")
	_ = os.WriteFile(path, []byte("1\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "delayacct.was"), []byte("0"), 0o644)
	_, _, rel := enableDelayAcct(path, dir)
	rel()
	if v, _ := readSysctl(path); v != "0" {
		t.Errorf("after the dead holder's successor stopped: %q, want 0", v)
	}
}

// Without a lock directory a monitor still measures, and says that it
// leaves accounting on rather than undo another monitor's.
func TestDelayAcctWithoutALockDir(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "task_delayacct")
	_ = os.WriteFile(path, []byte("0\n"), 0o644)
	blocker := filepath.Join(dir, "file")
	_ = os.WriteFile(blocker, nil, 0o644)
	ok, note, rel := enableDelayAcct(path, filepath.Join(blocker, "sub"))
	rel()
	if v, _ := readSysctl(path); !ok || v != "1" || !strings.Contains(note, "stays on") {
		t.Errorf("ok %v, sysctl %q, note %q; want measured, left on, and said so", ok, v, note)
	}
}
