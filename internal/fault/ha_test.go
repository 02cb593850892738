package fault

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }

// acks makes one user's commits at node every step seconds in [from, to).
func acks(user int, node string, from, to, step float64, found bool) []Ack {
	var out []Ack
	for s := from; s < to-1e-9; s += step {
		out = append(out, Ack{User: user, Node: node, S: math.Round(s*1000) / 1000, Found: found})
	}
	return out
}

// p1 says it is down a moment before the kill is done (the fault's time).
func TestMeasureHAKillFailsOverAndRejoins(t *testing.T) {
	end := 60.0
	roles := []RoleSpan{
		{"p1", FromServer, RolePrimary, -5, 9.98}, {"p1", FromServer, RoleDown, 9.98, 25}, {"p1", FromServer, RoleReplica, 25, 27}, {"p1", FromServer, RoleStreaming, 27, end},
		{"e1", FromServer, RoleStreaming, -5, 10.2}, {"e1", FromServer, RoleReplica, 10.2, 21}, {"e1", FromServer, RolePrimary, 21, end},
		{"a1", FromServer, RoleStreaming, -5, 10}, {"a1", FromServer, RoleReplica, 10, 21.5}, {"a1", FromServer, RoleStreaming, 21.5, end},
		{"p1", FromManager, RolePrimary, -5, 10}, {"p1", FromManager, RoleDown, 10, end},
		{"e1", FromManager, RoleStreaming, -5, 20.8}, {"e1", FromManager, RolePrimary, 20.8, end},
	}
	var in HAInput
	in.Roles, in.Checked = roles, true
	in.Acks = append(in.Acks, acks(0, "p1", 0, 9.9, 0.1, true)...)
	in.Acks = append(in.Acks, Ack{User: 0, Node: "p1", S: 9.95, Found: false}) // on its way to the standby when p1 died
	in.Acks = append(in.Acks, acks(0, "e1", 21.3, 40, 0.1, true)...)
	in.Acks = append(in.Acks, acks(1, "p1", 0.05, 9.9, 0.1, true)...)
	in.Acks = append(in.Acks, acks(1, "e1", 21.35, 40, 0.1, true)...)
	heal := 25.0
	h := MeasureHA(Span{Fault: 0, What: "node @primary kill", AtS: 10, HealS: &heal}, Interval{0, end}, end, in)
	want := &HA{
		OldPrimary: "p1", NewPrimary: "e1", PromotedS: f64(11), ElectedS: f64(10.8), ClientsS: f64(11.3),
		Lost: i64(1), LostBy: map[string]int64{"p1": 1},
		SplitBrain: &SplitBrain{Winner: "e1", Surviving: i64(0)},
		Rejoin:     &Rejoin{Node: "p1", Rejoined: true, RejoinedS: f64(2), RedundantS: f64(2)},
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("got  %s\nwant %s", show(h), show(want))
	}
}

func TestMeasureHASplitBrainCountsTheLosingSide(t *testing.T) {
	end := 40.0
	roles := []RoleSpan{
		{"p1", FromServer, RolePrimary, -5, 15}, {"p1", FromServer, RoleReplica, 15, end}, // demoted late, never streams again
		{"e1", FromServer, RoleStreaming, -5, 10}, {"e1", FromServer, RoleReplica, 10, 12}, {"e1", FromServer, RolePrimary, 12, end},
	}
	var in HAInput
	in.Roles, in.Checked = roles, true
	in.Acks = append(in.Acks, acks(0, "p1", 0, 14.5, 0.5, true)...)  // clients that still reach p1 …
	in.Acks[len(in.Acks)-4].Found = false                            // (some of it lost with p1's timeline)
	in.Acks = append(in.Acks, acks(1, "e1", 12.5, 30, 0.5, true)...) // … and clients at the new primary
	h := MeasureHA(Span{Fault: 2, What: "site us cut", AtS: 10}, Interval{5, end}, end, in)
	sb := h.SplitBrain
	if h.OldPrimary != "p1" || h.NewPrimary != "e1" || sb == nil {
		t.Fatalf("%s", show(h))
	}
	// p1 acknowledged at 12.0, 12.5, 13.0, 13.5, 14.0 while e1 was primary.
	if sb.Winner != "e1" || sb.ServersOverlapMs != 3000 || sb.AckedOverlapMs != 1500 || sb.LosingSideWrites != 5 || sb.Surviving == nil || *sb.Surviving != 4 {
		t.Errorf("split brain %+v surviving %v", sb, sb.Surviving)
	}
	if h.Rejoin == nil || h.Rejoin.Rejoined || h.Rejoin.RejoinedS != nil {
		t.Errorf("rejoin %+v", h.Rejoin)
	}
	if *h.Lost != 1 || h.LostBy["p1"] != 1 {
		t.Errorf("lost %d by %v", *h.Lost, h.LostBy)
	}
}

// A user whose connection to the old primary hung through the fault and
// wrote there again after it did not take writes there meanwhile.
func TestMeasureHAAckRunsBreakAtLongWaits(t *testing.T) {
	roles := []RoleSpan{
		{"p1", FromServer, RolePrimary, -5, 10}, {"p1", FromServer, RoleReplica, 10, 40},
		{"e1", FromServer, RoleStreaming, -5, 12}, {"e1", FromServer, RolePrimary, 12, 40},
	}
	var in HAInput
	in.Roles = roles
	in.Acks = append(in.Acks, acks(0, "e1", 0, 9, 0.5, true)...)   // user 0 writes at e1 (a read-write route gone wrong) …
	in.Acks = append(in.Acks, acks(0, "e1", 20, 25, 0.5, true)...) // … and again after a 11 s wait
	in.Acks = append(in.Acks, acks(1, "p1", 12, 18, 0.5, true)...)
	h := MeasureHA(Span{AtS: 10}, Interval{0, 40}, 40, in)
	if sb := h.SplitBrain; sb == nil || sb.AckedOverlapMs != 0 {
		t.Errorf("split brain %+v: the wait is not a run", sb)
	}
}

func TestMeasureHAWithoutRolesOrNodes(t *testing.T) {
	if h := MeasureHA(Span{AtS: 10}, Interval{0, 20}, 20, HAInput{}); h != nil {
		t.Errorf("no roles: %+v", h)
	}
	in := HAInput{Roles: []RoleSpan{{"p1", FromServer, RolePrimary, 0, 20}}, Acks: []Ack{{User: 0, S: 12}}}
	h := MeasureHA(Span{AtS: 10}, Interval{0, 20}, 20, in)
	if h == nil || h.SplitBrain != nil || h.Lost != nil || h.Rejoin != nil || h.OldPrimary != "p1" || h.NewPrimary != "" {
		t.Errorf("commits without nodes, journals not read: %s", show(h))
	}
}

func TestFoldHAGroupsOccurrences(t *testing.T) {
	var sums []Summary
	for i, rto := range []float64{10, 12, 11, 30} {
		sums = append(sums, Summary{Fault: i, What: "node @primary kill", UnavailableS: rto, HA: &HA{
			OldPrimary: "p1", NewPrimary: "e1", PromotedS: f64(rto - 1), Lost: i64(int64(i % 2)),
			SplitBrain: &SplitBrain{AckedOverlapMs: 0, Surviving: i64(0)},
			Rejoin:     &Rejoin{Node: "p1", Rejoined: i != 3, RejoinedS: f64(5)},
		}})
	}
	sums = append(sums, Summary{Fault: 9, What: "link us<->eu set down"}) // no HA figures
	g := FoldHA(sums)
	if len(g) != 1 {
		t.Fatalf("%d groups", len(g))
	}
	s := g[0]
	if s.N != 4 || s.Failovers != 4 || s.Lost != 2 || s.LostChecked != 4 || s.Rejoined != 3 || s.RejoinedS.N != 3 {
		t.Errorf("%+v", s)
	}
	if s.UnavailableS.P50 != 11 || s.UnavailableS.P95 != 30 || s.UnavailableS.Max != 30 || s.UnavailableS.Mean != 15.75 || s.UnavailableS.CIHalf <= 0 {
		t.Errorf("unavailable %+v", s.UnavailableS)
	}
	if s.SplitBrainMs.N != 4 || s.SplitBrainMs.Max != 0 {
		t.Errorf("split brain %+v", s.SplitBrainMs)
	}
}

func show(h *HA) string {
	if h == nil {
		return "nil"
	}
	b, _ := jsonMarshal(h)
	return string(b)
}

var jsonMarshal = func(v any) ([]byte, error) { return json.Marshal(v) }

// Faults 35 s apart: each window for lost commits starts BeforeS before
// its fault and ends where the next one's starts, so that none overlaps
// (the pg_auto_failover kill run summed 50,538 lost over its faults for
// 31,927 missing in all: faults 3 and 4 had counted the same 10 s).
func TestLostWindowsTile(t *testing.T) {
	got := LostWindows([]float64{10, 45, 80, 84}, -5, 370)
	want := []Interval{{0, 35}, {35, 70}, {70, 80}, {80, 370}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := LostWindows(nil, -5, 370); len(got) != 0 {
		t.Errorf("no faults: %v", got)
	}
	if got := LostWindows([]float64{3}, -5, 40); !reflect.DeepEqual(got, []Interval{{-5, 40}}) {
		t.Errorf("a fault within BeforeS of the warmup's start: %v", got)
	}
}

// Commits lost just before the second fault count for it, not for the
// first fault too: the faults' losses add up to the run's.
func TestMeasureHALostCountsOnce(t *testing.T) {
	end := 80.0
	roles := []RoleSpan{{"p1", FromServer, RolePrimary, -5, end}}
	in := HAInput{Roles: roles, Checked: true}
	in.Acks = append(in.Acks, acks(0, "p1", 0, 30, 1, true)...)
	in.Acks = append(in.Acks, acks(0, "p1", 30, 40, 1, false)...) // lost: 5 s before the second fault …
	in.Acks = append(in.Acks, acks(0, "p1", 40, end, 1, true)...)
	w := LostWindows([]float64{10, 45}, -5, end)
	first := MeasureHA(Span{AtS: 10}, w[0], 45, in)
	second := MeasureHA(Span{AtS: 45}, w[1], end, in)
	if first.Lost == nil || second.Lost == nil || *first.Lost+*second.Lost != 10 {
		t.Fatalf("lost %s and %s, want 10 in all", show(first), show(second))
	}
	if *first.Lost != 5 || *second.Lost != 5 { // … [30, 35) the first's, [35, 40) the second's
		t.Errorf("lost %d and %d, want 5 and 5", *first.Lost, *second.Lost)
	}
}

// Nodes down at the end (the pgaf kill run: e1 and a1 refused
// connections) are named beside Lost: a commit only they hold counts as
// lost.
func TestMeasureHANamesTheUnreadNodes(t *testing.T) {
	in := HAInput{Roles: []RoleSpan{{"p1", FromServer, RolePrimary, -5, 40}}, Checked: true, Unread: []string{"e1", "a1"}}
	in.Acks = acks(0, "p1", 0, 20, 1, false)
	h := MeasureHA(Span{AtS: 10}, Interval{0, 40}, 40, in)
	if h.Lost == nil || *h.Lost != 20 || !reflect.DeepEqual(h.LostUnread, []string{"a1", "e1"}) {
		t.Errorf("got %s", show(h))
	}
	in.Unread = nil
	if h := MeasureHA(Span{AtS: 10}, Interval{0, 40}, 40, in); h.LostUnread != nil {
		t.Errorf("every node read: %s", show(h))
	}
}
