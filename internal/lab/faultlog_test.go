package lab

import (
	"context"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"replab/internal/faultkind"
	"replab/internal/linkem"
	"replab/internal/testkit"
)

func TestFaultRecordLine(t *testing.T) {
	r := FaultRecord{Time: time.Date(2026, 11, 23, 16, 40, 1, 123456000, time.UTC), What: "node e1 kill", Action: FaultApply, Err: "boom\nagain"}
	if got, want := r.String(), "2026-11-23T16:40:01.123456Z apply node e1 kill error: boom again"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if got := linkWhat(LinkRequest{From: "a", To: "b", Both: true, Set: []string{"loss=5%", "delay=4ms"}}); got != "link a<->b set loss=5% delay=4ms" {
		t.Errorf("linkWhat: %q", got)
	}
}

// TestFaultsThroughControlSocket: node actions go to the registered
// handler, link faults heal to exactly what was there, and every applied
// fault is in the fault log (memory, file, status) with increasing times.
func TestFaultsThroughControlSocket(t *testing.T) {
	testkit.Need(t, testkit.Lab)
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
	if _, err := c.Fault(nodeOrder("e1", "", "kill")); err == nil || !strings.Contains(err.Error(), "no servers") {
		t.Errorf("node action without servers: %v", err)
	}
	nodes := &recNodes{}
	l.SetNodes([]NodeStatus{{Name: "e1", Site: "a"}, {Name: "e2", Site: "b"}})
	l.SetNodeControl(nodes)
	if _, err := c.Fault(nodeOrder("e9", "", "kill")); err == nil || !strings.Contains(err.Error(), "nodes: e1, e2") {
		t.Errorf("unknown node: %v", err)
	}
	if _, err := c.Fault(nodeOrder("e1", "", "explode")); err == nil || !strings.Contains(err.Error(), "kill") {
		t.Errorf("unknown action: %v", err)
	}
	if ans, err := c.Fault(nodeOrder("e1", "", "restart")); err != nil || ans.ID != "" {
		t.Errorf("a restart: %+v, %v; want it done, with nothing to heal", ans, err)
	}
	if _, err := c.HealFault(""); err == nil {
		t.Error("healing nothing: want an error")
	}
	kill, err := c.Fault(nodeOrder("e1", "", "kill"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.HealFault(kill.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fault(nodeOrder("e2", "", "pause")); err == nil || err.Error() != "engine test cannot pause nodes" {
		t.Errorf("failing action: %v", err)
	}
	stop, err := c.Fault(nodeOrder("e2", "replicat", "stop"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.HealFault(stop.ID); err != nil {
		t.Fatal(err)
	}
	if want := []string{"e1 restart", "e1 kill", "e1 start", "e2/replicat stop", "e2/replicat start"}; !reflect.DeepEqual(nodes.calls, want) {
		t.Errorf("handler calls %v, want %v", nodes.calls, want)
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
	if _, err := c.Fault(linkOrder("a", "x", false, "down")); err == nil || !strings.Contains(err.Error(), "a->b, b->a") {
		t.Errorf("unknown direction: %v", err)
	}
	if _, err := c.Fault(linkOrder("a", "b", true, "loss=200%")); err == nil {
		t.Error("bad value: want an error")
	}
	ans, err := c.Fault(linkOrder("a", "b", true, "up", "delay=300ms", "rate=1mbit"))
	if err != nil {
		t.Fatal(err)
	}
	during := params()
	if reflect.DeepEqual(during, before) {
		t.Fatal("the link fault changed nothing")
	}
	if _, err := c.HealFault(ans.ID); err != nil {
		t.Fatal(err)
	}
	if after := params(); !reflect.DeepEqual(after, before) {
		t.Errorf("after healing: %v\nwant what was there before: %v", after, before)
	}
	if _, err := c.HealFault(ans.ID); err == nil {
		t.Error("healing twice: want an error")
	}

	// Overlapping faults heal in any order to what was there before.
	first, err := c.Fault(linkOrder("a", "b", true, "delay=300ms"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Fault(linkOrder("a", "b", false, "loss=5%"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.HealFault(first.ID); err != nil {
		t.Fatal(err)
	}
	mid := params()
	ab := before["a->b"].(linkem.Params)
	ab.Loss = 0.05
	if !reflect.DeepEqual(mid["a->b"], ab) || !reflect.DeepEqual(mid["b->a"], before["b->a"]) {
		t.Errorf("after healing the first of two faults: %v\nwant a->b %v (the second still on), b->a %v", mid, ab, before["b->a"])
	}
	if _, err := c.HealFault(second.ID); err != nil {
		t.Fatal(err)
	}
	if after := params(); !reflect.DeepEqual(after, before) {
		t.Errorf("after healing both: %v\nwant what was there before: %v", after, before)
	}

	want := []string{"apply node e1 restart", "apply node e1 kill", "heal node e1 kill", "apply node e2 pause", "apply node e2 replicat stop", "heal node e2 replicat stop",
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
	if recs[3].Err == "" {
		t.Errorf("the failed pause is logged without its error: %+v", recs[3])
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

// nodeOrder is replab fault node NODE [STAGE] DO.
func nodeOrder(node, stage, do string) faultkind.Order {
	return faultkind.Order{Kind: do, Subject: faultkind.Subject{On: faultkind.OnNode, Node: node, Stage: stage}}
}

// linkOrder is replab fault link A->B (A<->B: both) CHANGES….
func linkOrder(from, to string, both bool, changes ...string) faultkind.Order {
	set := make([]any, len(changes))
	for i, c := range changes {
		set[i] = c
	}
	return faultkind.Order{Kind: faultkind.SetName, Subject: faultkind.Subject{On: faultkind.OnLink, From: from, To: to, Both: both},
		Keys: map[string]any{"set": set}}
}

// recNodes records the node actions asked of it; it cannot pause.
type recNodes struct {
	mu    sync.Mutex
	calls []string
}

func (n *recNodes) do(node, what string) error {
	if what == "pause" {
		return faultkind.Cannot("test", "pause nodes")
	}
	n.mu.Lock()
	n.calls = append(n.calls, node+" "+what)
	n.mu.Unlock()
	return nil
}

func (n *recNodes) Kill(_ context.Context, node string) error    { return n.do(node, "kill") }
func (n *recNodes) Stop(_ context.Context, node string) error    { return n.do(node, "stop") }
func (n *recNodes) Start(_ context.Context, node string) error   { return n.do(node, "start") }
func (n *recNodes) Restart(_ context.Context, node string) error { return n.do(node, "restart") }
func (n *recNodes) Pause(_ context.Context, node string) error   { return n.do(node, "pause") }
func (n *recNodes) Resume(_ context.Context, node string) error  { return n.do(node, "resume") }
func (n *recNodes) Promote(_ context.Context, node string) error { return n.do(node, "promote") }
func (n *recNodes) Stage(_ context.Context, node, stage, action string) error {
	return n.do(node+"/"+stage, action)
}

// TestFaultLogWithoutFaultsIsRemoved: the log is there from the start (for
// tail -f) and a lab without faults leaves no file behind.
func TestFaultLogWithoutFaultsIsRemoved(t *testing.T) {
	testkit.Need(t, testkit.Lab)
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

const triangleSpec = `
[lab]
name = "NAME"
[site.a]
[site.b]
[site.c]
[[link]]
sites = ["a", "b"]
delay = "2ms"
[[link]]
sites = ["a", "c"]
delay = "3ms"
[[link]]
sites = ["b", "c"]
delay = "4ms"
`

// TestSiteAndFlapFaultsThroughControlSocket: isolate takes every link of
// its site down and puts each back; a flapping link comes up between its
// downs and is put back at its heal; a link fault made during an isolation
// stays when the isolation heals under it.
func TestSiteAndFlapFaultsThroughControlSocket(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFrom(t, "fsf", triangleSpec)
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
	})
	c, err := Connect(root, s.Lab.Name)
	if err != nil {
		t.Fatal(err)
	}
	params := func() map[string]linkem.Params {
		st, err := c.Status()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]linkem.Params{}
		for _, lk := range st.Links {
			for _, d := range lk.Directions {
				m[d.From+"->"+d.To] = d.Params
			}
		}
		return m
	}
	before := params()
	site := func(name string) faultkind.Order {
		return faultkind.Order{Kind: "isolate", Subject: faultkind.Subject{On: faultkind.OnSite, Site: name}}
	}
	if _, err := c.Fault(site("z")); err == nil || !strings.Contains(err.Error(), `has no site "z" (sites: a, b, c)`) {
		t.Errorf("an unknown site: %v", err)
	}

	iso, err := c.Fault(site("a"))
	if err != nil {
		t.Fatal(err)
	}
	during := params()
	for d, p := range during {
		if cut := strings.Contains(d, "a"); p.Down != cut {
			t.Errorf("while a is isolated %s is down=%v", d, p.Down)
		}
	}

	// b<->c flaps meanwhile: down at once, up 200 ms later, …, until its
	// heal.
	flap, err := c.Fault(faultkind.Order{Kind: "flap", Subject: faultkind.Subject{On: faultkind.OnLink, From: "b", To: "c", Both: true},
		Keys: map[string]any{"every": "400ms", "down": "200ms"}, For: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if p := params(); !p["b->c"].Down || !p["c->b"].Down {
		t.Errorf("b<->c is up once it flaps: %v", p)
	}
	for deadline := time.Now().Add(30 * time.Second); params()["b->c"].Down; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("b->c did not come up between the downs of its flap")
		}
	}
	if _, err := c.HealFault(flap.ID); err != nil {
		t.Fatal(err)
	}
	if p := params(); p["b->c"] != before["b->c"] || p["c->b"] != before["c->b"] {
		t.Errorf("after the flap: b->c %+v, c->b %+v; want them as before", p["b->c"], p["c->b"])
	}

	// A change made while a is isolated is there after the isolation heals.
	slow, err := c.Fault(linkOrder("a", "b", false, "delay=300ms"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.HealFault(iso.ID); err != nil {
		t.Fatal(err)
	}
	mid := params()
	ab := before["a->b"]
	ab.Delay = 300 * time.Millisecond
	if mid["a->b"] != ab || mid["b->a"] != before["b->a"] || mid["a->c"] != before["a->c"] || mid["c->a"] != before["c->a"] {
		t.Errorf("after the isolation: %v\nwant a->b %+v and the rest as before %v", mid, ab, before)
	}
	if _, err := c.HealFault(slow.ID); err != nil {
		t.Fatal(err)
	}
	if after := params(); !reflect.DeepEqual(after, before) {
		t.Errorf("after every heal: %v\nwant %v", after, before)
	}
	var got []string
	for _, r := range l.FaultLog() {
		got = append(got, r.Action+" "+r.What+r.Err)
	}
	want := []string{"apply site a isolate", "apply link b<->c flap every 400ms down 200ms", "heal link b<->c flap every 400ms down 200ms",
		"apply link a->b set delay=300ms", "heal site a isolate", "heal link a->b set delay=300ms"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fault log %q\nwant %q", got, want)
	}
}
