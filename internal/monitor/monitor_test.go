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
type fakeLab struct{ t0 time.Time }

func (f *fakeLab) Stats() []emu.DirStats {
	el := time.Since(f.t0).Seconds()
	p := linkem.Params{RateBps: 10_000_000, Delay: 50 * time.Millisecond}
	return []emu.DirStats{
		{From: "a", To: "b", Params: p, Counters: linkem.Counters{DeliveredBytes: uint64(el * 500_000), DeliveredPackets: uint64(el * 500)}},
		{From: "b", To: "a", Params: p, Counters: linkem.Counters{DeliveredBytes: uint64(el * 1000), DeliveredPackets: uint64(el * 20)}},
	}
}

func (f *fakeLab) Path(from, to string) []string { return []string{from, to} }

// fakeCluster is a primary p1 in site a streaming to r1 in site b, whose
// startup process burns one core and whose backlog grows 1 MB/s. Its
// processes live in a fake /proc that Processes rewrites.
type fakeCluster struct {
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
	ticks := uint64(time.Since(f.t0).Seconds() * 100)
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
	el := time.Since(f.t0).Seconds()
	return []engine.ReplicaState{{Node: "r1", From: "p1", Kind: "physical", State: "streaming", Backlog: int64(el * 1e6), BacklogUnit: engine.UnitBytes,
		ReplayLagMs: el * 1000, Positions: []engine.Position{{Name: "replay_lsn", Value: "0/3000148"}}}}, nil
}

func TestMonitorWithFakes(t *testing.T) {
	dir := t.TempDir()
	sysctl := filepath.Join(dir, "task_delayacct")
	if err := os.WriteFile(sysctl, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cl := &fakeCluster{t0: now, proc: filepath.Join(dir, "proc")}
	m, err := Start(context.Background(), Config{
		Links: &fakeLab{t0: now}, Cluster: cl, Dir: dir, Interval: 50 * time.Millisecond,
		procRoot: cl.proc, delayAcctPath: sysctl,
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := readSysctl(sysctl); v != "1" {
		t.Errorf("delay accounting %q during the run, want 1", v)
	}
	start := time.Now().Add(120 * time.Millisecond)
	end := start.Add(600 * time.Millisecond)
	m.MarkMeasure(start, end)
	time.Sleep(time.Until(end) + 150*time.Millisecond)
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

	t.Run("the measure phase is exactly the marked one (boundary samples)", func(t *testing.T) {
		if math.Abs(sum.MeasureS-0.6) > 1e-9 || !sum.IOWaitMeasured || !strings.Contains(sum.IOWaitNote, "switched on") {
			t.Errorf("measure %.6f s, io wait measured %v (%q)", sum.MeasureS, sum.IOWaitMeasured, sum.IOWaitNote)
		}
		for _, b := range []time.Time{start, end} {
			took := false
			for _, p := range m.rolePts {
				if d := p.t.Sub(b); d >= 0 && d < 5*time.Millisecond {
					took = true
				}
			}
			if !took {
				t.Errorf("no sample within 5 ms after the boundary %s", b.Sub(now))
			}
		}
	})
	t.Run("links: bytes and utilization of the phase", func(t *testing.T) {
		ab := sum.Links["a->b"]
		if math.Abs(float64(ab.Bytes)-300_000) > 3_000 || ab.UtilizationAvgPct == nil || math.Abs(*ab.UtilizationAvgPct-40) > 1 {
			t.Errorf("a->b %+v, want ≈ 300000 bytes at 40%%", ab)
		}
		if sum.TotalBytes() != ab.Bytes+sum.Links["b->a"].Bytes || sum.BytesPerTransaction(100) != float64(sum.TotalBytes())/100 {
			t.Errorf("total %d, per transaction %.1f", sum.TotalBytes(), sum.BytesPerTransaction(100))
		}
	})
	t.Run("roles: CPU by node and role", func(t *testing.T) {
		st := sum.Roles["r1"]["startup"]
		// Ticks are 10 ms: allow two ticks at each end.
		if math.Abs(st.CPUS-0.6) > 0.04 || math.Abs(st.CPUCores-1) > 0.07 || st.Processes != 1 || st.RSSPeakBytes != 1000*int64(os.Getpagesize()) {
			t.Errorf("r1 startup %+v, want ≈ 0.6 s of CPU (one core)", st)
		}
		if ws := sum.Roles["p1"]["walsender"]; math.Abs(ws.CPUS-0.09) > 0.04 {
			t.Errorf("p1 walsender %+v, want ≈ 0.09 s", ws)
		}
	})
	t.Run("replication and verdict", func(t *testing.T) {
		r := sum.Replicas["r1"]
		if r.From != "p1" || r.Kind != "physical" || !r.LagGrows || r.ReplayLagMs == nil || r.Samples < 8 {
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
		c := sum.Cost
		if c.Samples < 15 || c.ProcessesMean != 3 || c.SampleWallMeanMs <= 0 || c.ReplicationSamples < 10 {
			t.Errorf("cost %+v", c)
		}
	})
	t.Run("CSV files have their headers and rows", func(t *testing.T) {
		roles := readCSV(t, filepath.Join(dir, RolesFile))
		if roles[0] != RolesHeader || len(roles) < 1+3*15 {
			t.Fatalf("roles.csv: %d lines, header %q", len(roles), roles[0])
		}
		last := strings.Split(roles[len(roles)-1], ",")
		if len(last) != 8 || last[1] != "r1" || last[2] != "walreceiver" || last[3] != "1" || last[6] == "" {
			t.Errorf("last roles.csv row %q", roles[len(roles)-1])
		}
		repl := readCSV(t, filepath.Join(dir, ReplicationFile))
		if repl[0] != ReplicationHeader || len(repl) < 10 {
			t.Fatalf("replication.csv: %d lines, header %q", len(repl), repl[0])
		}
		if f := strings.Split(repl[1], ","); len(f) != strings.Count(ReplicationHeader, ",")+1 || f[1] != "r1" || f[2] != "p1" || f[4] != "streaming" || f[6] != "bytes" || f[9] != "replay_lsn=0/3000148" {
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
	path := filepath.Join(t.TempDir(), "task_delayacct")
	_ = os.WriteFile(path, []byte("0\n"), 0o644)
	ok1, _, rel1 := enableDelayAcct(path)
	ok2, _, rel2 := enableDelayAcct(path)
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
	_, note, rel := enableDelayAcct(path)
	rel()
	if v, _ := readSysctl(path); v != "1" || note != "" {
		t.Errorf("already on: left %q, note %q; want 1 untouched and no note", v, note)
	}

	ok, note, rel := enableDelayAcct(filepath.Join(t.TempDir(), "missing", "task_delayacct"))
	rel()
	if ok || !strings.Contains(note, "not measured") {
		t.Errorf("missing sysctl: ok %v, note %q", ok, note)
	}
}
