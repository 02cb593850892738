package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrintVerification(t *testing.T) {
	for _, c := range []struct {
		name string
		v    *Verification
		want []string
	}{
		{"all there", &Verification{Acked: 500, Nodes: map[string]*NodeVerification{"p1": {Present: 500}, "e1": {Present: 500}}},
			[]string{"commits     verified: all 500 acknowledged commits at 2 nodes"}},
		{"lost", &Verification{Acked: 500, Unknown: 2, Lost: 3, LostEverywhere: 3, Nodes: map[string]*NodeVerification{
			"p1": {Present: 498, Lost: 3, LostKeys: []string{"0/7", "0/8", "1/9"}, UnacknowledgedButPresent: 1},
			"e1": {Present: 497, Lost: 3, LostKeys: []string{"0/7", "0/8", "1/9"}}},
			Skipped: map[string]string{"r1": "a partial copy"}},
			[]string{"warning: acknowledged commits LOST: 3 at no node checked (of 500); 2 never acknowledged, landed: e1 0, p1 1",
				"    e1: 3 missing; first 0/7, 0/8, 1/9", "    p1: 3 missing", "    r1 not checked: a partial copy"}},
		{"a node no longer following", &Verification{Acked: 900, Lost: 400, LostEverywhere: 2, Nodes: map[string]*NodeVerification{
			"p1": {Present: 898, Lost: 2, LostKeys: []string{"0/8", "0/9"}},
			"a1": {Present: 500, Lost: 400, HeldElsewhere: 398, LostKeys: []string{"0/3"}},
			"e1": {Present: 898, Lost: 2, HeldElsewhere: 2, LostKeys: []string{"1/4"}}}},
			[]string{"warning: acknowledged commits LOST: 2 at no node checked (of 900)",
				"    a1: 400 missing, 398 of them held at another node; first 0/3",
				"    e1: 2 missing, all held at another node: behind, or no longer following; first 1/4",
				"    p1: 2 missing; first 0/8, 0/9"}},
		{"missing at a node only", &Verification{Acked: 900, Lost: 400, Nodes: map[string]*NodeVerification{
			"p1": {Present: 900}, "a1": {Present: 500, Lost: 400, HeldElsewhere: 400, LostKeys: []string{"0/3"}}}},
			[]string{"warning: acknowledged commits missing at some nodes, each held at another (of 900)",
				"    a1: 400 missing, all held at another node: behind, or no longer following; first 0/3"}},
		{"error", &Verification{Error: "the cluster was not flowing"}, []string{"commits     not verified: the cluster was not flowing"}},
	} {
		var b bytes.Buffer
		printVerification(&b, c.v)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, b.String())
			}
		}
	}
}

// Repetitions sum what was acknowledged and lost.
func TestAggregateVerification(t *testing.T) {
	mk := func(acked, lost int64) *Summary {
		return &Summary{Kind: "run", Complete: true, Verification: &Verification{Acked: acked, Lost: lost,
			Nodes: map[string]*NodeVerification{"p1": {Present: acked - lost, Lost: lost, LostKeys: []string{"0/1"}}}}}
	}
	agg := Aggregate([]*Summary{mk(100, 0), mk(200, 5)}, nil, 0.95)
	v := agg.Verification
	if v == nil || v.Acked != 300 || v.Lost != 5 || v.Nodes["p1"].Lost != 5 || v.Nodes["p1"].Present != 295 {
		t.Errorf("aggregate verification %+v (p1 %+v)", v, v.Nodes["p1"])
	}
}

func TestPrintConflicts(t *testing.T) {
	for _, c := range []struct {
		name string
		c    *ReplicationConflicts
		want []string
	}{
		{"counted", &ReplicationConflicts{Counted: "wsrep_local_cert_failures + wsrep_local_bf_aborts", Count: 7, PerS: 0.35,
			Nodes: map[string]int64{"g2": 5, "g1": 2}, Restarted: []string{"g3"}},
			[]string{"conflicts   7 found by replication (0.35/s of load): g1 2, g2 5; counted: wsrep_local_cert_failures + wsrep_local_bf_aborts",
				"    restarted, counted since: g3"}},
		{"error", &ReplicationConflicts{Counted: "pglogical conflicts", Error: "not counted: the measure phase did not begin"},
			[]string{"conflicts   not counted: the measure phase did not begin (pglogical conflicts)"}},
	} {
		var b bytes.Buffer
		printConflicts(&b, c.c)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q in\n%s", c.name, w, b.String())
			}
		}
	}
	var b bytes.Buffer
	printConflicts(&b, nil)
	if b.Len() != 0 {
		t.Errorf("nil printed %q", b.String())
	}
}
