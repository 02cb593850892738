package runner

import (
	"reflect"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/report"
)

func TestDivergedTables(t *testing.T) {
	tests := []struct {
		name string
		sums map[string]map[string]int64
		want map[string]string
	}{
		{"all equal", map[string]map[string]int64{"a": {"t": 1, "u": 2}, "b": {"t": 1, "u": 2}}, nil},
		{"one table differs", map[string]map[string]int64{"a": {"t": 1, "u": 2}, "b": {"t": 1, "u": 3}, "c": {"t": 1, "u": 2}},
			map[string]string{"u": "a 2, b 3, c 2"}},
		{"a node lacks a table", map[string]map[string]int64{"a": {"t": 0}, "b": {}},
			map[string]string{"t": "a 0, b missing"}},
		{"one node", map[string]map[string]int64{"a": {"t": 5}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := divergedTables(tc.sums); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestClipFallbacks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	f := func(x float64) *float64 { return &x }
	from, to := at(10), at(30)
	tests := []struct {
		name    string
		periods []engine.FallbackPeriod
		want    report.SyncFallbacks
	}{
		{"none", nil, report.SyncFallbacks{ResolutionMs: 100}},
		{"before and after the phase only", []engine.FallbackPeriod{{Node: "p", Start: at(1), End: at(9)}, {Node: "p", Start: at(31), End: time.Time{}}},
			report.SyncFallbacks{ResolutionMs: 100}},
		{"inside", []engine.FallbackPeriod{{Node: "p", Start: at(12), End: at(14.5)}},
			report.SyncFallbacks{Count: 1, AsyncS: 2.5, AsyncFraction: 0.125, ResolutionMs: 100,
				Periods: []report.FallbackPeriod{{Node: "p", StartS: 2, EndS: f(4.5)}}}},
		{"across both edges, and one still going on", []engine.FallbackPeriod{{Node: "p", Start: at(8), End: at(11)}, {Node: "p", Start: at(25), End: time.Time{}}},
			report.SyncFallbacks{Count: 2, AsyncS: 6, AsyncFraction: 0.3, ResolutionMs: 100,
				Periods: []report.FallbackPeriod{{Node: "p", StartS: -2, EndS: f(1)}, {Node: "p", StartS: 15}}}},
		{"ending after the phase", []engine.FallbackPeriod{{Node: "p", Start: at(29), End: at(40)}},
			report.SyncFallbacks{Count: 1, AsyncS: 1, AsyncFraction: 0.05, ResolutionMs: 100,
				Periods: []report.FallbackPeriod{{Node: "p", StartS: 19}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := clipFallbacks(tc.periods, 100*time.Millisecond, from, to); !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got %+v, want %+v", *got, tc.want)
			}
		})
	}
}

// TestCompareJournal: at one node, an acknowledged key missing is lost
// (named writer/seq relative to the measurement's base, in order); a key
// present whose commit was unknown is counted as such, one whose put was
// refused as unexpected; another measurement's keys are left alone.
func TestCompareJournal(t *testing.T) {
	base := 2 * ackWriters
	k := func(w int, s int64) enginekit.AckKey { return enginekit.AckKey{Writer: base + w, Seq: s} }
	acked := map[enginekit.AckKey]bool{k(0, 1): true, k(0, 2): true, k(1, 1): true, k(1, 3): true}
	unknown := map[enginekit.AckKey]bool{k(0, 3): true, k(1, 2): true}
	present := map[enginekit.AckKey]bool{k(0, 1): true, k(1, 1): true, k(0, 3): true, k(1, 9): true,
		{Writer: base - 1, Seq: 1}: true, {Writer: base + ackWriters, Seq: 1}: true}
	got, lost := compareAcks(present, base, acked, unknown)
	want := &report.NodeVerification{Present: 4, Lost: 2, LostKeys: []string{"0/2", "1/3"}, UnacknowledgedButPresent: 1, Unexpected: 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if want := []enginekit.AckKey{k(0, 2), k(1, 3)}; !reflect.DeepEqual(lost, want) {
		t.Errorf("lost %v, want %v", lost, want)
	}
}

// TestHeldElsewhere: a commit missing at a node but found at another is
// held elsewhere (the node fell behind or stopped following); one found
// nowhere is lost by the cluster, counted once however many nodes miss it.
func TestHeldElsewhere(t *testing.T) {
	k := func(s int64) enginekit.AckKey { return enginekit.AckKey{Seq: s} }
	nodes := map[string]*report.NodeVerification{"p1": {Lost: 1}, "e1": {Lost: 1}, "a1": {Lost: 3}}
	missing := map[string][]enginekit.AckKey{"p1": {k(9)}, "e1": {k(9)}, "a1": {k(5), k(6), k(9)}}
	found := map[enginekit.AckKey]bool{k(1): true, k(5): true, k(6): true}
	if got := heldElsewhere(nodes, missing, found); got != 1 {
		t.Errorf("lost everywhere %d, want 1 (seq 9)", got)
	}
	for n, want := range map[string]int64{"p1": 0, "e1": 0, "a1": 2} {
		if got := nodes[n].HeldElsewhere; got != want {
			t.Errorf("%s: held elsewhere %d, want %d", n, got, want)
		}
	}
}
