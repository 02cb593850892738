package monitor

import (
	"strings"
	"testing"
	"time"
)

func TestParseCPULine(t *testing.T) {
	c := parseCPULine("cpu  1000 10 300 5000 200 5 6 40 0 0")
	if !c.ok || c.total != 1000+10+300+5000+200+5+6+40 || c.idle != 5200 || c.steal != 40 {
		t.Errorf("parsed %+v", c)
	}
	for _, bad := range []string{"cpu0 1 2 3 4 5", "cpu 1 2", "intr 5 6 7 8 9", "cpu 1 x 3 4 5"} {
		if c := parseCPULine(bad); c.ok {
			t.Errorf("%q parsed as %+v", bad, c)
		}
	}
}

// seconds builds samples 1 s apart on 2 cores at 100 ticks a second (200
// ticks an interval): idle[i] and steal[i] ticks in interval i, and replab
// using selfTicks each second.
func seconds(idle, steal []uint64, selfTicks uint64) []machinePoint {
	t0 := time.Unix(1000, 0)
	pts := []machinePoint{{t: t0, c: cpuTicks{ok: true}}}
	var c cpuTicks
	c.ok = true
	for i := range idle {
		c.total += 200
		c.idle += idle[i]
		c.steal += steal[i]
		c.self += selfTicks
		pts = append(pts, machinePoint{t: t0.Add(time.Duration(i+1) * time.Second), c: c})
	}
	return pts
}

func repeat(v uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestSummarizeMachine(t *testing.T) {
	start, end := time.Unix(1000, 0), time.Unix(1010, 0)
	for _, tc := range []struct {
		name        string
		idle, steal []uint64
		bound       bool
		busySeconds float64
		busyMean    float64
		why         string
	}{
		{"a quarter busy is not machine-bound", repeat(150, 10), repeat(0, 10), false, 0, 25, ""},
		{"every core busy every second is", repeat(4, 10), repeat(0, 10), true, 10, 98, "every core was at least 95 % busy for 10.0 of 10.0 measured seconds"},
		{"one busy second in ten is not (the share must pass a tenth)",
			append(repeat(4, 1), repeat(150, 9)...), repeat(0, 10), false, 1, 32.3, ""},
		{"two busy seconds in ten are", append(repeat(4, 2), repeat(150, 8)...), repeat(0, 10), true, 2, 39.6, "for 2.0 of 10.0 measured seconds"},
		{"steal of a tenth of the cores is", repeat(150, 10), repeat(20, 10), true, 0, 25, "the hypervisor took 10.0 % of the cores"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := summarizeMachine(seconds(tc.idle, tc.steal, 30), start, end, 2, 100, 0.2)
			if s == nil {
				t.Fatal("no summary")
			}
			if s.Bound != tc.bound || s.BusySeconds != tc.busySeconds || s.Seconds != 10 || s.BusyMeanPct != tc.busyMean {
				t.Errorf("bound %v (%s), busy seconds %v of %v, busy mean %v %%; want %v, %v of 10, %v %%",
					s.Bound, s.Why, s.BusySeconds, s.Seconds, s.BusyMeanPct, tc.bound, tc.busySeconds, tc.busyMean)
			}
			if tc.why != "" && !strings.Contains(s.Why, tc.why) {
				t.Errorf("why %q, want %q", s.Why, tc.why)
			}
			// replab 30 ticks a second at 100 Hz: 0.3 cores; the nodes 0.2;
			// the rest of the busy cores is other work.
			if s.ReplabCores != 0.3 || s.ServerCores != 0.2 || s.OtherCores != round3(max(tc.busyMean/100*2-0.5, 0)) {
				t.Errorf("replab %v, servers %v, other %v cores", s.ReplabCores, s.ServerCores, s.OtherCores)
			}
		})
	}
}

func TestSummarizeMachineKeepsToTheMeasurePhase(t *testing.T) {
	// 10 s of samples; the phase is seconds 3 to 8: 5 intervals, the busy
	// ones outside it do not count.
	pts := seconds(append(append(repeat(4, 3), repeat(150, 5)...), repeat(4, 2)...), repeat(0, 10), 0)
	s := summarizeMachine(pts, time.Unix(1003, 0), time.Unix(1008, 0), 2, 100, 0)
	if s == nil || s.Seconds != 5 || s.BusySeconds != 0 || s.Bound {
		t.Errorf("%+v, want 5 quiet seconds", s)
	}
	if summarizeMachine(pts[:1], time.Unix(1000, 0), time.Unix(1010, 0), 2, 100, 0) != nil {
		t.Error("a summary from one sample")
	}
}
