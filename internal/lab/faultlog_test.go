package lab

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"replab/internal/linkem"
)

func TestFaultRecordLine(t *testing.T) {
	r := FaultRecord{Time: time.Date(2026, 11, 23, 16, 40, 1, 123456000, time.UTC), What: "node e1 kill", Action: FaultApply, Err: "boom\nagain"}
	if got, want := r.String(), "2026-11-23T16:40:01.123456Z apply node e1 kill error: boom again"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	for do, want := range map[string]string{"kill": "start", "stop": "start", "pause": "resume"} {
		if h, err := HealOf(do); err != nil || h != want {
			t.Errorf("HealOf(%s) = %q, %v; want %s", do, h, err, want)
		}
	}
	for _, do := range []string{"start", "restart", "resume", "x"} {
		if _, err := HealOf(do); err == nil {
			t.Errorf("HealOf(%s): want an error", do)
		}
	}
	if got := linkWhat(LinkRequest{From: "a", To: "b", Both: true, Set: []string{"loss=5%", "delay=4ms"}}); got != "link a<->b set loss=5% delay=4ms" {
		t.Errorf("linkWhat: %q", got)
	}
}

// TestFaultsThroughControlSocket: node actions go to the registered
// handler, link faults heal to exactly what was there, and every applied
// fault is in the fault log (memory, file, status) with increasing times.
func TestFaultsThroughControlSocket(t *testing.T) {
	requireLab(t)
	s := specFrom(t, "flt", captureSpec)
	root := t.TempDir()
	l, err := Up(ctxFor(t, 2*time.Minute), s, Options{StateRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab close: %v", err)
		}
		assertGone(t, root, s.Lab.Name)
		if _, err := os.Stat(FaultLogPath(root, s.Lab.Name)); err != nil {
			t.Errorf("the fault log does not outlive the lab: %v", err)
		}
	})
	c, err := Connect(root, s.Lab.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Node(NodeRequest{Node: "e1", Do: "kill"}); err == nil || !strings.Contains(err.Error(), "no servers") {
		t.Errorf("node action without servers: %v", err)
	}
	var mu sync.Mutex
	var calls []string
	l.SetNodes([]NodeStatus{{Name: "e1", Site: "a"}, {Name: "e2", Site: "b"}})
	l.SetNodeControl(func(ctx context.Context, node, stage, do string) error {
		if do == "pause" {
			return errors.New("engine test cannot pause nodes")
		}
		if stage != "" {
			node += "/" + stage
		}
		mu.Lock()
		calls = append(calls, node+" "+do)
		mu.Unlock()
		return nil
	})
	if _, err := c.Node(NodeRequest{Node: "e9", Do: "kill"}); err == nil || !strings.Contains(err.Error(), "nodes: e1, e2") {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := c.Node(NodeRequest{Node: "e1", Do: "explode"}); err == nil || !strings.Contains(err.Error(), "kill") {
		t.Errorf("unknown action: %v", err)
	}
	if _, err := c.Node(NodeRequest{Node: "e1", Do: "restart", Heal: true}); err == nil {
		t.Error("healing a restart: want an error")
	}
	if _, err := c.Node(NodeRequest{Node: "e1", Do: "kill"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Node(NodeRequest{Node: "e1", Do: "kill", Heal: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Node(NodeRequest{Node: "e2", Do: "pause"}); err == nil || err.Error() != "engine test cannot pause nodes" {
		t.Errorf("failing action: %v", err)
	}
	if _, err := c.Node(NodeRequest{Node: "e2", Stage: "replicat", Do: "stop", Heal: true}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"e1 kill", "e1 start", "e2/replicat start"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("handler calls %v, want %v", calls, want)
	}

	params := func() map[string]any {
		st, err := c.Status()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		for _, lk := range st.Links {
			for _, d := range lk.Directions {
				m[d.From+"->"+d.To] = d.Params
			}
		}
		return m
	}
	if _, err := c.SetLink(LinkRequest{From: "a", To: "b", Set: []string{"delay=7ms", "loss=1%"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetLink(LinkRequest{From: "b", To: "a", Set: []string{"down"}}); err != nil {
		t.Fatal(err)
	}
	before := params()
	if _, err := c.LinkFault(LinkRequest{From: "a", To: "x", Set: []string{"down"}}); err == nil || !strings.Contains(err.Error(), "a->b, b->a") {
		t.Errorf("unknown direction: %v", err)
	}
	if _, err := c.LinkFault(LinkRequest{From: "a", To: "b", Both: true, Set: []string{"loss=200%"}}); err == nil {
		t.Error("bad value: want an error")
	}
	ans, err := c.LinkFault(LinkRequest{From: "a", To: "b", Both: true, Set: []string{"up", "delay=300ms", "rate=1mbit"}})
	if err != nil {
		t.Fatal(err)
	}
	during := params()
	if reflect.DeepEqual(during, before) {
		t.Fatal("the link fault changed nothing")
	}
	if _, err := c.HealLink(ans.ID); err != nil {
		t.Fatal(err)
	}
	if after := params(); !reflect.DeepEqual(after, before) {
		t.Errorf("after healing: %v\nwant what was there before: %v", after, before)
	}
	if _, err := c.HealLink(ans.ID); err == nil {
		t.Error("healing twice: want an error")
	}

	// Overlapping faults heal in any order to what was there before.
	first, err := c.LinkFault(LinkRequest{From: "a", To: "b", Both: true, Set: []string{"delay=300ms"}})
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.LinkFault(LinkRequest{From: "a", To: "b", Set: []string{"loss=5%"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.HealLink(first.ID); err != nil {
		t.Fatal(err)
	}
	mid := params()
	ab := before["a->b"].(linkem.Params)
	ab.Loss = 0.05
	if !reflect.DeepEqual(mid["a->b"], ab) || !reflect.DeepEqual(mid["b->a"], before["b->a"]) {
		t.Errorf("after healing the first of two faults: %v\nwant a->b %v (the second still on), b->a %v", mid, ab, before["b->a"])
	}
	if _, err := c.HealLink(second.ID); err != nil {
		t.Fatal(err)
	}
	if after := params(); !reflect.DeepEqual(after, before) {
		t.Errorf("after healing both: %v\nwant what was there before: %v", after, before)
	}

	want := []string{"apply node e1 kill", "heal node e1 kill", "apply node e2 pause", "heal node e2 replicat stop",
		"apply link a->b set delay=7ms loss=1%", "apply link b->a set down",
		"apply link a<->b set up delay=300ms rate=1mbit", "heal link a<->b set up delay=300ms rate=1mbit",
		"apply link a<->b set delay=300ms", "apply link a->b set loss=5%", "heal link a<->b set delay=300ms", "heal link a->b set loss=5%"}
	recs := l.FaultLog()
	var got []string
	for i, r := range recs {
		got = append(got, r.Action+" "+r.What)
		if i > 0 && !r.Time.After(recs[i-1].Time) {
			t.Errorf("record %d at %v, not after %v", i, r.Time, recs[i-1].Time)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fault log %q\nwant %q", got, want)
	}
	if recs[2].Err == "" {
		t.Errorf("the failed pause is logged without its error: %+v", recs[2])
	}
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Faults) != len(want) || st.FaultLog != FaultLogPath(root, s.Lab.Name) {
		t.Errorf("status lists %d faults in %q, want %d in %q", len(st.Faults), st.FaultLog, len(want), FaultLogPath(root, s.Lab.Name))
	}
	b, err := os.ReadFile(FaultLogPath(root, s.Lab.Name))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(recs) {
		t.Fatalf("fault log file has %d lines, want %d:\n%s", len(lines), len(recs), b)
	}
	for i, r := range recs {
		if lines[i] != r.String() {
			t.Errorf("line %d %q, want %q", i+1, lines[i], r.String())
		}
	}
}

// TestFaultLogWithoutFaultsIsRemoved: the log is there from the start (for
// tail -f) and a lab without faults leaves no file behind.
func TestFaultLogWithoutFaultsIsRemoved(t *testing.T) {
	requireLab(t)
	s := specFrom(t, "fln", captureSpec)
	root := t.TempDir()
	l, err := Up(ctxFor(t, 2*time.Minute), s, Options{StateRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	path := FaultLogPath(root, s.Lab.Name)
	if _, err := os.Stat(path); err != nil {
		t.Errorf("no fault log while the lab runs: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Error(err)
	}
	assertGone(t, root, s.Lab.Name)
	if _, err := os.Stat(path); err == nil {
		t.Errorf("%s left behind by a lab without faults", path)
	}
}
