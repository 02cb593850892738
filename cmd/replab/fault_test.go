package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"replab/internal/faultkind"
	"replab/internal/lab"
	"replab/internal/testkit"
)

func TestParseFault(t *testing.T) {
	flap := map[string]string{"every": "2s", "down": "500ms"}
	for _, c := range []struct {
		args []string
		dur  time.Duration
		keys map[string]string
		want string // "" = ok
	}{
		{[]string{"link", "a<->b", "down"}, 20 * time.Second, nil, ""},
		{[]string{"link", "a->b", "loss=5%", "delay=400ms"}, 0, nil, ""},
		{[]string{"node", "e1", "kill"}, 10 * time.Second, nil, ""},
		{[]string{"node", "e1", "pause"}, time.Second, nil, ""},
		{[]string{"node", "e1", "restart"}, 0, nil, ""},
		{nil, 0, nil, "say what to break"},
		{[]string{"disk", "x"}, 0, nil, "neither link nor node"},
		{[]string{"link", "a<->b"}, 0, nil, "at least one change"},
		{[]string{"link", "a-b", "down"}, 0, nil, "not a link direction"},
		{[]string{"node", "e1"}, 0, nil, "a node, optionally one of its stages, and one action"},
		{[]string{"node", "t1", "replicat", "kill"}, 5 * time.Second, nil, ""},
		{[]string{"node", "t1", "replicat", "promote"}, 0, nil, "cannot be promoted"},
		{[]string{"node", "t1", "replicat", "kill", "now"}, 0, nil, "one action"},
		{[]string{"node", "e1", "explode"}, 0, nil, "unknown action \"explode\""},
		{[]string{"node", "e1", "restart"}, time.Second, nil, "cannot be healed"},
		{[]string{"node", "e1", "start"}, time.Second, nil, "cannot be healed"},
		{[]string{"link", "a<->b", "down"}, -time.Second, nil, "positive duration"},
		// The kinds of issue 33.
		{[]string{"site", "eu", "isolate"}, 10 * time.Second, nil, ""},
		{[]string{"site", "eu", "isolate"}, 0, nil, ""},
		{[]string{"site", "eu"}, 0, nil, "fault site: give a site and what happens to it (cut, isolate)"},
		{[]string{"site", "eu", "sink"}, 0, nil, `fault site: unknown action "sink": use one of cut, isolate`},
		{[]string{"link", "a<->b", "flap"}, 20 * time.Second, flap, ""},
		{[]string{"link", "a->b", "flap"}, 20 * time.Second, flap, ""},
		{[]string{"link", "a<->b", "flap"}, 0, flap, "fault link a<->b flap: a flap needs for"},
		{[]string{"link", "a<->b", "flap"}, 20 * time.Second, map[string]string{"every": "2s"}, "a flap needs down"},
		{[]string{"link", "a<->b", "flap"}, 20 * time.Second, map[string]string{"every": "2x", "down": "1s"}, "--every 2x: not a duration"},
		{[]string{"link", "a<->b", "flap"}, 20 * time.Second, map[string]string{"every": "1s", "down": "1s"}, "--down 1s: not below every = 1s"},
		{[]string{"link", "a<->b", "flap", "fast"}, 20 * time.Second, flap, "give what it takes as flags (--every, --down)"},
		{[]string{"link", "a<->b", "down"}, 20 * time.Second, flap, "--down goes with flap, not with set"},
		{[]string{"site", "eu", "isolate"}, 0, map[string]string{"every": "1s"}, "--every goes with flap, not with isolate"},
	} {
		fc, err := parseFault(c.args, c.dur, c.keys)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v --for %s %v: error %v, want one with %q", c.args, c.dur, c.keys, err, c.want)
		}
		if err == nil && (fc.kind == nil || fc.order.Kind != fc.kind.Name || fc.order.Subject.On != c.args[0]) {
			t.Errorf("%v: parsed %+v", c.args, fc)
		}
	}
	for _, c := range []struct {
		args []string
		keys map[string]string
		want faultkind.Order
	}{
		{[]string{"node", "t1", "pump", "pause"}, nil,
			faultkind.Order{Kind: "pause", Subject: faultkind.Subject{On: "node", Node: "t1", Stage: "pump"}}},
		{[]string{"link", "a<->b", "loss=5%", "up"}, nil,
			faultkind.Order{Kind: "set", Subject: faultkind.Subject{On: "link", From: "a", To: "b", Both: true}, Keys: map[string]any{"set": []any{"loss=5%", "up"}}}},
		{[]string{"link", "a->b", "flap"}, flap,
			faultkind.Order{Kind: "flap", Subject: faultkind.Subject{On: "link", From: "a", To: "b"}, Keys: map[string]any{"every": "2s", "down": "500ms"}, For: time.Minute}},
		{[]string{"site", "eu", "isolate"}, nil,
			faultkind.Order{Kind: "isolate", Subject: faultkind.Subject{On: "site", Site: "eu"}, For: time.Minute}},
	} {
		dur := c.want.For
		fc, err := parseFault(c.args, dur, c.keys)
		if err != nil || !reflect.DeepEqual(fc.order, c.want) {
			t.Errorf("%v: %+v, %v\nwant %+v", c.args, fc.order, err, c.want)
		}
	}
}

// labStatus is lab status --json.
func labStatus(t *testing.T, state string) lab.Status {
	t.Helper()
	out, code := replab(t, state, "lab", "status", "--json")
	if code != 0 {
		t.Fatalf("lab status: %s", out)
	}
	var st lab.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func linkParams(st lab.Status) map[string]any {
	m := map[string]any{}
	for _, l := range st.Links {
		for _, d := range l.Directions {
			m[d.From+"->"+d.To] = d.Params
		}
	}
	return m
}

// background starts replab fault and waits until it prints "healing in".
func background(t *testing.T, state string, args ...string) (*exec.Cmd, *syncBuf) {
	t.Helper()
	var buf syncBuf
	cmd := exec.Command(binPath, append(append([]string{}, args...), "--state", state)...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	for deadline := time.Now().Add(time.Minute); !strings.Contains(buf.String(), "healing in"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v did not apply its fault within a minute:\n%s", args, buf.String())
		}
	}
	return cmd, &buf
}

// finish waits for a background replab fault and wants exit 0 within limit.
func finish(t *testing.T, cmd *exec.Cmd, buf *syncBuf, limit time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%v: %v\n%s", cmd.Args, err, buf.String())
		}
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		t.Fatalf("%v did not end within %s:\n%s", cmd.Args, limit, buf.String())
	}
	t.Logf("%v printed:\n%s", cmd.Args[1:], buf.String())
}

// TestFaultLinkCommand: replab fault link partitions and heals to exactly
// what was there, Ctrl-C heals early, every action is in the fault log
// with increasing times, and mistakes are one line with exit 1.
func TestFaultLinkCommand(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab)
	state := t.TempDir()
	spec, name := writeSpec(t, "flt")
	labUp(t, spec, state)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fault", "--lab", "nolab-x", "link", "primary<->eu", "down"}, "lab nolab-x is not running"},
		{[]string{"fault", "link", "primary<->mars", "down", "--for", "2s"}, "links: primary->eu, eu->primary"},
		{[]string{"fault", "link", "primary->eu", "loss=300%"}, "loss"},
		{[]string{"fault", "link", "primary->eu", "delay=fast", "--for", "1s"}, "delay"},
		{[]string{"fault", "node", "e1", "kill"}, "this lab has no servers"},
		{[]string{"fault", "node", "e1", "restart", "--for", "1s"}, "cannot be healed"},
		{[]string{"fault", "volcano"}, "neither link nor node"},
	} {
		out, code := replab(t, state, c.args...)
		if code != 1 || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 || strings.Contains(out, "goroutine ") {
			t.Errorf("%v: exit %d, output %q: want one line with %q and exit 1", c.args, code, out, c.want)
		}
	}
	if f := labStatus(t, state).Faults; len(f) != 0 {
		t.Errorf("refused faults were logged: %+v", f)
	}

	// Something to put back: primary->eu has loss, eu->primary is down.
	for _, args := range [][]string{{"link", "set", "primary->eu", "loss=1%", "delay=30ms"}, {"fault", "link", "eu->primary", "down"}} {
		if out, code := replab(t, state, args...); code != 0 {
			t.Fatalf("%v: %s", args, out)
		}
	}
	replab(t, state, "fault", "link", "eu->primary", "up")
	before := linkParams(labStatus(t, state))

	// eu listens on nothing: a connection from primary is refused at once
	// when the link is up, and hangs when it is down.
	reach := func() bool {
		t.Helper()
		out, code := replab(t, "", "exec", "--state", state, "primary", "--", "timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/198.18.0.2/9")
		switch code {
		case 124:
			return false
		case 1:
			return true
		}
		t.Fatalf("probe across the link: exit %d: %s", code, out)
		return false
	}
	if !reach() {
		t.Fatal("eu is not reachable before the fault")
	}
	cmd, buf := background(t, state, "fault", "link", "primary<->eu", "down", "--for", "4s")
	if reach() {
		t.Error("eu is reachable during the partition")
	}
	finish(t, cmd, buf, 30*time.Second)
	if !reach() {
		t.Error("eu is not reachable after the partition healed")
	}
	if after := linkParams(labStatus(t, state)); !reflect.DeepEqual(after, before) {
		t.Errorf("after the partition: %v\nwant what was there before: %v", after, before)
	}

	// Ctrl-C during --for heals at once.
	cmd, buf = background(t, state, "fault", "link", "primary->eu", "loss=5%", "delay=400ms", "--for", "10m")
	if p := linkParams(labStatus(t, state)); reflect.DeepEqual(p, before) {
		t.Error("the loss fault changed nothing")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	finish(t, cmd, buf, 30*time.Second)
	if !strings.Contains(buf.String(), "interrupted") {
		t.Errorf("no word of the interruption:\n%s", buf.String())
	}
	if after := linkParams(labStatus(t, state)); !reflect.DeepEqual(after, before) {
		t.Errorf("after Ctrl-C: %v\nwant what was there before: %v", after, before)
	}

	st := labStatus(t, state)
	want := []string{
		"apply link primary->eu set loss=1% delay=30ms",
		"apply link eu->primary set down",
		"apply link eu->primary set up",
		"apply link primary<->eu set down",
		"heal link primary<->eu set down",
		"apply link primary->eu set loss=5% delay=400ms",
		"heal link primary->eu set loss=5% delay=400ms",
	}
	var got []string
	for i, r := range st.Faults {
		got = append(got, r.Action+" "+r.What)
		if i > 0 && !r.Time.After(st.Faults[i-1].Time) {
			t.Errorf("fault %d at %v, not after %v", i, r.Time, st.Faults[i-1].Time)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fault log %q\nwant %q", got, want)
	}
	if d := st.Faults[4].Time.Sub(st.Faults[3].Time); d < 4*time.Second || d > 10*time.Second {
		t.Errorf("the partition lasted %s, want about 4s", d)
	}
	logFile := filepath.Join(state, name+".faults.log")
	if st.FaultLog != logFile {
		t.Errorf("status fault_log %q, want %q", st.FaultLog, logFile)
	}
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n != len(want) || !strings.Contains(string(b), " heal link primary<->eu set down\n") {
		t.Errorf("%s has %d lines, want %d:\n%s", logFile, n, len(want), b)
	}
	out, _ := replab(t, state, "lab", "status")
	if !strings.Contains(out, "fault log "+logFile) {
		t.Errorf("lab status does not name the fault log:\n%s", out)
	}
	out, code := replab(t, "", "fault", "--help")
	for _, w := range []string{"fault link A<->B down", "fault node NODE kill", "--for", "faults.log", "Ctrl-C"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("fault --help: exit %d, no %q in\n%s", code, w, out)
		}
	}
}

const triangleSpec = `[lab]
name = "NAME"
[site.primary]
[site.eu]
[site.asia]
[[link]]
sites = ["primary", "eu"]
delay = "2ms"
[[link]]
sites = ["primary", "asia"]
delay = "3ms"
[[link]]
sites = ["eu", "asia"]
delay = "4ms"
`

// TestFaultSiteCommand: replab fault site eu isolate cuts eu off from
// every other site, not the others from each other, and Ctrl-C puts each
// link back as it was; a link flaps and is put back; both are in the
// fault log.
func TestFaultSiteCommand(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab)
	state := t.TempDir()
	name := fmt.Sprintf("cfs-%d-%04x", os.Getpid()%10000, rand.IntN(0x10000))
	spec := filepath.Join(t.TempDir(), "lab.toml")
	if err := os.WriteFile(spec, []byte(strings.Replace(triangleSpec, "NAME", name, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	labUp(t, spec, state)
	st := labStatus(t, state)
	addr := map[string]string{}
	for _, s := range st.Sites {
		addr[s.Name] = s.Address
	}
	before := linkParams(st)
	// Nothing listens: a connection is refused at once when the way is
	// open, and hangs when it is cut.
	reach := func(from, to string) bool {
		t.Helper()
		out, code := replab(t, "", "exec", "--state", state, from, "--", "timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/"+addr[to]+"/9")
		switch code {
		case 124:
			return false
		case 1:
			return true
		}
		t.Fatalf("probe %s->%s: exit %d: %s", from, to, code, out)
		return false
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fault", "site", "mars", "isolate"}, `has no site "mars" (sites: primary, eu, asia)`},
		{[]string{"fault", "site", "eu", "sink"}, `unknown action "sink": use one of cut, isolate`},
		{[]string{"fault", "link", "primary<->eu", "flap", "--every", "1s", "--down", "2s", "--for", "5s"}, "--down 2s: not below every = 1s"},
	} {
		out, code := replab(t, state, c.args...)
		if code != 1 || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("%v: exit %d, output %q: want one line with %q and exit 1", c.args, code, out, c.want)
		}
	}
	if !reach("primary", "eu") || !reach("asia", "eu") || !reach("primary", "asia") {
		t.Fatal("the sites do not reach each other before the fault")
	}

	cmd, buf := background(t, state, "fault", "site", "eu", "isolate", "--for", "10m")
	if reach("primary", "eu") || reach("eu", "asia") {
		t.Error("eu is reachable while isolated")
	}
	if !reach("primary", "asia") {
		t.Error("primary and asia lost each other while eu was isolated")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	finish(t, cmd, buf, time.Minute)
	for _, w := range []string{"apply site eu isolate", "heal site eu isolate (parameters before it put back)", "link primary->eu ", "link asia->eu "} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("replab fault site printed no %q", w)
		}
	}
	if !reach("primary", "eu") || !reach("eu", "asia") {
		t.Error("eu is not reachable after the isolation healed")
	}
	if after := linkParams(labStatus(t, state)); !reflect.DeepEqual(after, before) {
		t.Errorf("after the isolation: %v\nwant what was there before: %v", after, before)
	}

	cmd, buf = background(t, state, "fault", "link", "primary<->asia", "flap", "--every", "400ms", "--down", "200ms", "--for", "1s")
	finish(t, cmd, buf, time.Minute)
	if after := linkParams(labStatus(t, state)); !reflect.DeepEqual(after, before) {
		t.Errorf("after the flap: %v\nwant what was there before: %v", after, before)
	}
	var got []string
	for _, r := range labStatus(t, state).Faults {
		got = append(got, r.Action+" "+r.What+r.Err)
	}
	want := []string{"apply site eu isolate", "heal site eu isolate",
		"apply link primary<->asia flap every 400ms down 200ms", "heal link primary<->asia flap every 400ms down 200ms"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fault log %q\nwant %q", got, want)
	}
}

const pgFaultSpec = `[lab]
name = "NAME"
[site.primary]
[site.eu]
[[link]]
sites = ["primary", "eu"]
delay = "5ms"
[engine]
kind = "postgres"
[node.p1]
site = "primary"
role = "primary"
[node.e1]
site = "eu"
role = "standby"
from = "p1"
`

// TestFaultNodeCommand: replab fault node on real PostgreSQL servers —
// kill --for stops the node and starts it again, pause --for freezes it
// and resumes it, Ctrl-C heals early, an unknown node lists the nodes.
func TestFaultNodeCommand(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Postgres, testkit.Psql)
	state := t.TempDir()
	name := fmt.Sprintf("cfn-%d-%04x", os.Getpid()%10000, rand.IntN(0x10000))
	spec := filepath.Join(t.TempDir(), "lab.toml")
	if err := os.WriteFile(spec, []byte(strings.Replace(pgFaultSpec, "NAME", name, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	labUp(t, spec, state)
	dsn := map[string]string{}
	for _, n := range labStatus(t, state).Nodes {
		dsn[n.Name] = n.DSN
	}
	up := func(node string) bool {
		t.Helper()
		// Bounded: a paused server accepts the connection and never answers.
		_, code := replab(t, "", "exec", "--state", state, "primary", "--", "timeout", "5", "psql", dsn[node], "-Atc", "SELECT 1")
		return code == 0
	}
	if !up("e1") || !up("p1") {
		t.Fatal("nodes not up before the faults")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fault", "node", "x9", "kill"}, "nodes: p1, e1"},
		{[]string{"fault", "node", "e1", "dance"}, "kill"},
	} {
		out, code := replab(t, state, c.args...)
		if code != 1 || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("%v: exit %d, output %q: want one line with %q and exit 1", c.args, code, out, c.want)
		}
	}

	cmd, buf := background(t, state, "fault", "node", "e1", "pause", "--for", "8s")
	if up("e1") {
		t.Error("e1 answers while paused")
	}
	finish(t, cmd, buf, 2*time.Minute)
	if !up("e1") {
		t.Error("e1 does not answer after the resume")
	}

	cmd, buf = background(t, state, "fault", "node", "e1", "kill", "--for", "3s")
	if up("e1") {
		t.Error("e1 answers after kill")
	}
	finish(t, cmd, buf, 2*time.Minute)
	if !up("e1") {
		t.Error("e1 does not answer after the heal")
	}

	cmd, buf = background(t, state, "fault", "node", "e1", "stop", "--for", "10m")
	if up("e1") {
		t.Error("e1 answers after stop")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	finish(t, cmd, buf, 2*time.Minute)
	if !up("e1") {
		t.Error("e1 does not answer after Ctrl-C healed the stop")
	}

	st := labStatus(t, state)
	var got []string
	for i, r := range st.Faults {
		got = append(got, r.Action+" "+r.What)
		if i > 0 && !r.Time.After(st.Faults[i-1].Time) {
			t.Errorf("fault %d at %v, not after %v", i, r.Time, st.Faults[i-1].Time)
		}
	}
	want := []string{"apply node e1 pause", "heal node e1 pause", "apply node e1 kill", "heal node e1 kill", "apply node e1 stop", "heal node e1 stop"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fault log %q\nwant %q", got, want)
	}
}

// syncBuf is a bytes.Buffer safe for a process's output and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
