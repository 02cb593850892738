package lab

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"replab/internal/spec"
	"replab/internal/testkit"
)

var captureSpec = testkit.ReadFile("testdata/capture.toml")

// requireTcpdump returns the path of the real pcap reader the tests check
// files with.
func requireTcpdump(t *testing.T) string {
	t.Helper()
	testkit.Need(t, testkit.Tcpdump)
	p, _ := exec.LookPath("tcpdump")
	return p
}

// tcpdumpRead reads a capture with tcpdump -nr and returns its packet
// lines; it fails the test when tcpdump cannot parse the file or the link
// type is not raw IP.
func tcpdumpRead(t *testing.T, tcpdump, file string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tcpdump, "-nr", file)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tcpdump -nr %s: %v\n%s", file, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "RAW") {
		t.Errorf("tcpdump -nr %s: link type not raw IP: %s", file, stderr.String())
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// checkDirection asserts that every packet tcpdump shows went from one
// site's address to the other's.
func checkDirection(t *testing.T, lines []string, from, to *Site) {
	t.Helper()
	want := " IP " + from.Address.String() + "."
	wantTo := " > " + to.Address.String() + "."
	for _, line := range lines {
		if !strings.Contains(line, want) || !strings.Contains(line, wantTo) {
			t.Errorf("capture of %s->%s holds %q: want packets from %s to %s", from.Name, to.Name, line, from.Address, to.Address)
			return
		}
	}
}

// TestSpecCaptureIsReadByTcpdump: capture = true writes one pcap per
// direction for the lab's life; after Close tcpdump reads each, with as
// many packets as the lab counted, all going the file's way.
func TestSpecCaptureIsReadByTcpdump(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	tcpdump := requireTcpdump(t)
	s := specFrom(t, "cap", strings.Replace(captureSpec, `delay = "2ms"`, "delay = \"2ms\"\ncapture = true\ncapture_bytes = 96", 1))
	root, capDir := t.TempDir(), t.TempDir()
	l, err := Up(ctxFor(t, 2*time.Minute), s, Options{StateRoot: root, CaptureDir: capDir, NoControl: true})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			l.Close()
		}
		assertGone(t, root, s.Lab.Name)
	})
	a, b := l.Site("a"), l.Site("b")
	srv := startServer(t, b)
	if r := rtt(t, a, srv, 20); r.Received == 0 {
		t.Fatalf("no probe came back: %+v", r)
	}
	running := l.Status().Captures
	if len(running) != 2 || !running[0].Running {
		t.Errorf("status while running: %+v, want two running captures", running)
	}
	srv.Close()
	closed = true
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	caps := l.Captures()
	if len(caps) != 2 {
		t.Fatalf("captures after close: %+v, want 2", caps)
	}
	for _, c := range caps {
		from, to := a, b
		if c.Direction == "b->a" {
			from, to = b, a
		}
		if want := filepath.Join(capDir, CaptureFileName(from.Name, to.Name)); c.File != want {
			t.Errorf("%s written to %s, want %s", c.Direction, c.File, want)
		}
		if c.Running || c.SnapBytes != 96 || c.DroppedRecords != 0 {
			t.Errorf("%s: %+v, want stopped, snap 96, nothing dropped", c.Direction, c)
		}
		lines := tcpdumpRead(t, tcpdump, c.File)
		if len(lines) == 0 || uint64(len(lines)) != c.Packets {
			t.Errorf("%s: tcpdump reads %d packets, the lab wrote %d: want the same, more than 0", c.Direction, len(lines), c.Packets)
		}
		checkDirection(t, lines, from, to)
	}
}

// TestCaptureOverControlSocket: a running lab captures a direction on
// request (replab capture): errors for unknown and busy directions, the
// session ends on cancel or after its duration, and tcpdump reads the files.
func TestCaptureOverControlSocket(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	tcpdump := requireTcpdump(t)
	s := specFrom(t, "capc", captureSpec)
	root, capDir := t.TempDir(), t.TempDir()
	l, err := Up(ctxFor(t, 2*time.Minute), s, Options{StateRoot: root, CaptureDir: capDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab close: %v", err)
		}
		assertGone(t, root, s.Lab.Name)
	})
	a, b := l.Site("a"), l.Site("b")
	srv := startServer(t, b)
	c, err := Connect(root, s.Lab.Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	if _, err := c.Capture(ctx, CaptureRequest{From: "a", To: "x"}, nil); err == nil || !strings.Contains(err.Error(), "a->b, b->a") {
		t.Errorf("unknown direction: got %v, want an error listing a->b, b->a", err)
	}

	// One direction until cancelled, into a chosen file.
	file := filepath.Join(t.TempDir(), "ab.pcap")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan []CaptureStatus, 1)
	type result struct {
		caps []CaptureStatus
		err  error
	}
	done := make(chan result, 1)
	go func() {
		caps, err := c.Capture(cctx, CaptureRequest{From: "a", To: "b", Path: file}, func(cs []CaptureStatus) { started <- cs })
		done <- result{caps, err}
	}()
	select {
	case cs := <-started:
		if len(cs) != 1 || cs[0].File != file || !cs[0].Running {
			t.Fatalf("started %+v, want one running capture into %s", cs, file)
		}
	case r := <-done:
		t.Fatalf("capture ended before it started: %+v %v", r.caps, r.err)
	case <-ctx.Done():
		t.Fatal("capture did not start")
	}
	if _, err := c.Capture(ctx, CaptureRequest{From: "a", To: "b"}, nil); err == nil || !strings.Contains(err.Error(), "already being captured into "+file) {
		t.Errorf("second capture of a->b: got %v, want an error naming the running capture's file", err)
	}
	if ents, _ := os.ReadDir(capDir); len(ents) != 0 {
		t.Errorf("a refused capture left files in %s: %v", capDir, ents)
	}
	rtt(t, a, srv, 10)
	cancel()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("capture did not stop when cancelled")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.caps) != 1 || r.caps[0].Running || r.caps[0].Packets == 0 {
		t.Fatalf("final %+v, want one stopped capture with packets", r.caps)
	}
	lines := tcpdumpRead(t, tcpdump, file)
	if uint64(len(lines)) != r.caps[0].Packets {
		t.Errorf("tcpdump reads %d packets, the lab wrote %d", len(lines), r.caps[0].Packets)
	}
	checkDirection(t, lines, a, b)

	// Both directions for a while, into the lab's capture directory.
	go func() {
		caps, err := c.Capture(ctx, CaptureRequest{From: "a", To: "b", Both: true, For: 1500 * time.Millisecond}, nil)
		done <- result{caps, err}
	}()
	time.Sleep(200 * time.Millisecond) // let it start (the counts below need traffic inside it)
	rtt(t, a, srv, 10)
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("a capture --for 1.5s did not end")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.caps) != 2 {
		t.Fatalf("final %+v, want two captures", r.caps)
	}
	for _, cs := range r.caps {
		from, to := a, b
		if cs.Direction == "b->a" {
			from, to = b, a
		}
		if filepath.Dir(cs.File) != capDir || !strings.HasPrefix(filepath.Base(cs.File), "capture-"+from.Name+"-"+to.Name+"-") {
			t.Errorf("%s written to %s, want capture-%s-%s-TIME.pcap in %s", cs.Direction, cs.File, from.Name, to.Name, capDir)
		}
		lines := tcpdumpRead(t, tcpdump, cs.File)
		if len(lines) == 0 || uint64(len(lines)) != cs.Packets {
			t.Errorf("%s: tcpdump reads %d packets, the lab wrote %d: want the same, more than 0", cs.Direction, len(lines), cs.Packets)
		}
		checkDirection(t, lines, from, to)
	}

	// A client that goes away (a killed replab capture) ends its session.
	gctx, gone := context.WithCancel(ctx)
	body := strings.NewReader(`{"from":"b","to":"a"}`)
	hreq, _ := http.NewRequestWithContext(gctx, "POST", "http://lab/capture", body)
	long := *c.hc
	long.Timeout = 0
	resp, err := long.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	var ev CaptureEvent
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil || len(ev.Captures) != 1 {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	gone()
	resp.Body.Close()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		caps := l.Captures()
		if last := caps[len(caps)-1]; !last.Running {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the capture of a client that went away still runs")
		}
	}
	if n := len(l.Status().Captures); n != 4 {
		t.Errorf("status lists %d captures, want 4 (finished ones stay listed)", n)
	}
}

// TestCaptureFileNamesMustNotClash: sites "a-b" and "c" and sites "a" and
// "b-c" would share capture-a-b-c.pcap; the lab refuses rather than
// overwrite one with the other.
func TestCaptureFileNamesMustNotClash(t *testing.T) {
	s, err := spec.Parse("clash.toml", []byte(`
[lab]
name = "clash"
[site.a-b]
[site.c]
[site.a]
[site.b-c]
[[link]]
sites = ["a-b", "c"]
capture = true
[[link]]
sites = ["a", "b-c"]
capture = true
`))
	if err != nil {
		t.Fatal(err)
	}
	l := &Lab{Spec: s, capDir: t.TempDir()}
	err = l.startSpecCaptures()
	if err == nil || !strings.Contains(err.Error(), "capture-a-b-c.pcap") {
		t.Errorf("got %v, want an error naming capture-a-b-c.pcap", err)
	}
	if ents, _ := os.ReadDir(l.capDir); len(ents) != 0 {
		t.Errorf("files created: %v", ents)
	}
}
