package lab

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"replab/internal/linkem"
	"replab/internal/netcheck"
	"replab/internal/testkit"
)

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func startServer(t *testing.T, s *Site) *netcheck.Server {
	t.Helper()
	srv, err := netcheck.StartServer(ctxFor(t, time.Minute), s, s.Address)
	if err != nil {
		t.Fatalf("start probe server in %s: %v", s.Name, err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func rtt(t *testing.T, from *Site, srv *netcheck.Server, n int) netcheck.RTTResult {
	t.Helper()
	r, err := netcheck.RTT(ctxFor(t, time.Minute), from, srv.Addr(), n, 20*time.Millisecond)
	if err != nil {
		t.Fatalf("rtt from %s: %v", from.Name, err)
	}
	return r
}

// checkRTT checks round trips across emulated links whose delays add up
// to want, n probes from a site to srv. Every probe comes back (on a
// lossy link, one at least), none sooner than want (exact: a link never delivers a packet before its
// delay has passed, and its timer never fires early). The fastest comes
// back within max(want/2, 10 ms) of it: how close the others come is a
// benchmark figure (make bench, replab lab check). A busy machine can
// stall the emulator for a few hundred ms (a 50 ms path once showed 268 ms
// for all of 10 probes beside a CPU hog), so a measurement that misses
// only this bound is repeated, up to 3 times; a link with a missing,
// doubled or stale delay misses it every time.
func checkRTT(t *testing.T, what string, from *Site, srv *netcheck.Server, n int, want time.Duration, lossy bool) {
	t.Helper()
	w := float64(want) / 1e6
	slack := max(w/2, 10)
	for try := 1; ; try++ {
		r := rtt(t, from, srv, n)
		if r.Received == 0 || (!lossy && r.Received != r.Sent) || r.MinMs < w {
			t.Errorf("%s: %d of %d probes came back, RTT min %.3f ms: want all (lossy: some), none under %.0f ms", what, r.Received, r.Sent, r.MinMs, w)
			return
		}
		if r.MinMs <= w+slack {
			return
		}
		if try == 3 {
			t.Errorf("%s: RTT min %.3f ms, median %.3f ms in the last of 3 tries: want the minimum within %.0f ms of %.0f ms",
				what, r.MinMs, r.P50Ms, slack, w)
			return
		}
		t.Logf("%s: RTT min %.3f ms, median %.3f ms: more than %.0f ms above %.0f ms, measuring again", what, r.MinMs, r.P50Ms, slack, w)
	}
}

func TestTwoSitesExample(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFile(t, "two", "examples/two-sites.toml")
	l := up(t, s)
	primary, eu := l.Site("primary"), l.Site("eu")

	t.Run("sites are namespaces named after the lab with their addresses", func(t *testing.T) {
		for _, site := range l.Sites() {
			if !netnsExists(site.Netns) || !strings.HasPrefix(site.Netns, objectPrefix(s.Lab.Name)) {
				t.Errorf("site %s: netns %q missing or badly named", site.Name, site.Netns)
			}
			out, err := exec.Command("ip", "-n", site.Netns, "-br", "addr", "show", TUNName).CombinedOutput()
			if err != nil || !strings.Contains(string(out), site.Address.String()) {
				t.Errorf("site %s: %s has no address %s: %s %v", site.Name, TUNName, site.Address, out, err)
			}
		}
	})

	t.Run("sites use cubic by default, not the root's congestion control", func(t *testing.T) {
		if got := inSite(t, eu, "/proc/sys/net/ipv4/tcp_congestion_control"); got != "cubic" {
			t.Errorf("congestion control in eu = %q, want cubic", got)
		}
	})

	t.Run("RTT is the configured 50 ms", func(t *testing.T) {
		srv := startServer(t, eu)
		checkRTT(t, "primary->eu->primary", primary, srv, 50, 50*time.Millisecond, false)
	})

	t.Run("commands started in a site run in its namespace and cgroups", func(t *testing.T) {
		var out bytes.Buffer
		cmd := exec.Command("sh", "-c", "ip -br addr show "+TUNName+"; cat /proc/self/cgroup")
		cmd.Stdout = &out
		if err := eu.Start(cmd); err != nil {
			t.Fatalf("start: %v", err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("wait: %v", err)
		}
		if !strings.Contains(out.String(), eu.Address.String()) {
			t.Errorf("command did not run in eu's namespace: %s", out.String())
		}
		if !strings.Contains(out.String(), eu.Netns) {
			t.Errorf("command is not in eu's cgroups: %s", out.String())
		}
	})

	t.Run("status lists sites and both directions of the link", func(t *testing.T) {
		st := l.Status()
		if len(st.Sites) != 2 || len(st.Links) != 1 || len(st.Links[0].Directions) != 2 {
			t.Fatalf("status: %+v", st)
		}
		for _, site := range st.Sites {
			if site.TunTxDroppedPackets != 0 {
				t.Errorf("site %s: %d packets dropped by the kernel before the emulator read them", site.Name, site.TunTxDroppedPackets)
			}
		}
		for _, w := range st.Warnings {
			if strings.Contains(w, "read TUN counters") {
				t.Error(w)
			}
		}
		for _, d := range st.Links[0].Directions {
			if d.Params.Delay != 25*time.Millisecond || d.Params.RateBps != 100e6 {
				t.Errorf("%s->%s params %+v", d.From, d.To, d.Params)
			}
			if d.Counters.DeliveredPackets == 0 {
				t.Errorf("%s->%s delivered nothing after the RTT test", d.From, d.To)
			}
		}
	})
}

func TestGoodputMatchesRate(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFrom(t, "rate", `
[lab]
name = "NAME"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "10ms"
rate = "10mbit"
`)
	l := up(t, s)
	srv := startServer(t, l.Site("b"))
	for _, dir := range []netcheck.Direction{netcheck.Upload, netcheck.Download} {
		r, err := netcheck.Throughput(ctxFor(t, time.Minute), l.Site("a"), srv.Addr(), dir, time.Second, 3*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		ratio := r.GoodputBps / 10e6
		t.Logf("%s goodput %.2f Mbit/s (%.3f of rate), %d retransmits", dir, r.GoodputBps/1e6, ratio, r.Retransmits)
		// TCP payload over 1500-byte packets is at most 96.5 % of the rate,
		// and the link never exceeds it (give or take bytes shifted across
		// the window's edges). How close it comes is a benchmark figure
		// (make bench): on a busy machine the emulator's thread waits for
		// a CPU while the link could send, packets bunch up, the queue
		// overflows and TCP backs off (0.63 seen beside a CPU hog). A rate
		// not enforced (far above 1), or taken as bytes where it is bits
		// or the reverse (8 or 1/8), is still outside 0.25..1.05; the
		// model's pacing and queue are exact in linkem's tests.
		if ratio < 0.25 || ratio > 1.05 {
			t.Errorf("%s goodput %.3f of the rate, want 0.25..1.05", dir, ratio)
		}
	}
}

func TestRandomLossWithinConfidenceInterval(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFrom(t, "loss", `
[lab]
name = "NAME"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "5ms"
rate = "100mbit"
[link.forward]
loss = "2%"
`)
	l := up(t, s)
	srv := startServer(t, l.Site("b"))
	const n = 5000
	r, err := netcheck.Loss(ctxFor(t, time.Minute), l.Site("a"), srv.Addr(), n, 200, 2500)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := netcheck.BinomialCI(n-r.Received, n, 0.999)
	t.Logf("lost %d of %d (%.2f%%); 99.9%% CI of the loss rate [%.4f, %.4f]", n-r.Received, n, 100*r.LossFraction, lo, hi)
	if 0.02 < lo || 0.02 > hi {
		t.Errorf("configured loss 0.02 is outside the 99.9%% CI [%.4f, %.4f] of the measured %.4f", lo, hi, r.LossFraction)
	}
	st := l.Status()
	for _, d := range st.Links[0].Directions {
		if d.From == "a" && d.Counters.DroppedLossPackets == 0 {
			t.Errorf("a->b counted no loss drops")
		}
	}
}

// TestSuperPacketsCutByLossReachTCP: at 1 Gbit/s the emulator writes
// runs of a TCP super-packet's segments as super-packets, and cuts out the
// segments the model loses, giving the pieces their own headers. The
// kernel takes every piece (no write errors), the model's losses reach TCP
// (it retransmits), and the flow goes on.
func TestSuperPacketsCutByLossReachTCP(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab)
	s := specFrom(t, "gso", `
[lab]
name = "NAME"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "5ms"
rate = "1gbit"
[link.forward]
loss = "1%"
`)
	l := up(t, s)
	srv := startServer(t, l.Site("b"))
	r, err := netcheck.Throughput(ctxFor(t, time.Minute), l.Site("a"), srv.Addr(), netcheck.Upload, time.Second, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st := l.Status()
	var lost uint64
	for _, d := range st.Links[0].Directions {
		if d.From == "a" {
			lost = d.Counters.DroppedLossPackets
		}
	}
	t.Logf("goodput %.1f Mbit/s, %d retransmits, %d packets lost by the model", r.GoodputBps/1e6, r.Retransmits, lost)
	for _, p := range st.Ports {
		if p.WriteErrors != 0 {
			t.Errorf("site %s: %d write errors: the kernel refused frames", p.Name, p.WriteErrors)
		}
	}
	// Mathis at 1 % loss and 10 ms: about 14 Mbit/s. A flow whose pieces
	// the receiver could not put together would stall far below.
	if lost == 0 || r.Retransmits == 0 || r.GoodputBps < 2e6 {
		t.Errorf("want losses, retransmits and a flow above 2 Mbit/s")
	}

	// Traffic classes: both sites hold "nodes" and b a server port, so an
	// unmarked connection to it would be replication; one the lab dials
	// (Site.DialContext) carries linkem.ClientTOS, which b's kernel
	// reflects: client traffic both ways.
	var ln net.Listener
	if err := l.Site("b").Do(func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(l.Site("b").Address, 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	classes := func() (ab, ba [linkem.NumClasses]uint64) {
		for _, d := range l.Emulator().Stats() {
			if d.From == "a" {
				ab = d.Counters.ClassBytes
			} else {
				ba = d.Counters.ClassBytes
			}
		}
		return ab, ba
	}
	l.SetTrafficClasses([]netip.AddrPort{ln.Addr().(*net.TCPAddr).AddrPort()}, []string{"a", "b"}, nil)
	ab0, ba0 := classes()
	c, err := l.Site("a").DialContext(ctxFor(t, time.Minute), "tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	deadline := time.Now().Add(30 * time.Second) // bounds a broken run; the loop ends when the bytes are counted
	for {
		ab, ba := classes()
		client, repl := ab[linkem.ClassClient]-ab0[linkem.ClassClient], ab[linkem.ClassReplication]-ab0[linkem.ClassReplication]
		acks := ba[linkem.ClassClient] - ba0[linkem.ClassClient]
		if client >= 1<<20 && acks > 0 {
			// The earlier iperf3 flow's last packets (its FIN and ACKs,
			// between two sites with nodes: replication) may still cross
			// now: 104 bytes in one suite run. The marked megabyte must
			// not.
			if repl >= client/100 {
				t.Errorf("a->b: %d bytes counted as replication during a marked client connection of %d bytes", repl, client)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a->b: %d client bytes (want ≥ 1 MiB), b->a: %d (want > 0: the reflected mark); replication a->b %d", client, acks, repl)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestLinkChangesWhileRunning(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFile(t, "set", "examples/two-sites.toml")
	l := up(t, s)
	primary, eu := l.Site("primary"), l.Site("eu")
	srv := startServer(t, eu)

	if err := l.SetLink("primary", "eu", false, []string{"delay=80ms"}); err != nil {
		t.Fatal(err)
	}
	checkRTT(t, "after delay=80ms one way", primary, srv, 10, 105*time.Millisecond, false)

	if err := l.SetLink("primary", "eu", true, []string{"down"}); err != nil {
		t.Fatal(err)
	}
	if r := rtt(t, primary, srv, 5); r.Received != 0 {
		t.Errorf("link down: %d of %d probes came back", r.Received, r.Sent)
	}

	if err := l.SetLink("primary", "eu", true, []string{"up", "delay=10ms"}); err != nil {
		t.Fatal(err)
	}
	checkRTT(t, "back up with 10 ms each way", primary, srv, 10, 20*time.Millisecond, false)

	for _, bad := range [][]string{{"delay=80"}, {"rate=fast"}, {"colour=red"}, {"mtu=9000"}} {
		if err := l.SetLink("primary", "eu", false, bad); err == nil {
			t.Errorf("SetLink %v: want an error", bad)
		}
	}
	if err := l.SetLink("primary", "nowhere", false, []string{"delay=1ms"}); err == nil || !strings.Contains(err.Error(), "primary->eu") {
		t.Errorf("unknown link: want an error listing the links, got %v", err)
	}
}

func TestShipExampleIsAsymmetric(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFile(t, "ship", "examples/ship.toml")
	l := up(t, s)
	if got := inSite(t, l.Site("ship"), "/proc/sys/net/ipv4/tcp_congestion_control"); got != "reno" {
		t.Errorf("ship congestion control = %q, want reno", got)
	}
	st := l.Status()
	rates := map[string]int64{}
	for _, d := range st.Links[0].Directions {
		rates[d.From+"->"+d.To] = d.Params.RateBps
		if d.Params.Loss != 0.01 || d.Params.Delay != 300*time.Millisecond {
			t.Errorf("%s->%s: %+v", d.From, d.To, d.Params)
		}
	}
	if rates["hq->ship"] != 2e6 || rates["ship->hq"] != 256e3 {
		t.Errorf("rates %v, want hq->ship 2mbit, ship->hq 256kbit", rates)
	}
	srv := startServer(t, l.Site("ship"))
	// 600 ms plus serialization (under 3 ms at 256 kbit/s).
	checkRTT(t, "hq->ship->hq", l.Site("hq"), srv, 5, 600*time.Millisecond, true)
}

func TestSitesWithoutDirectLinkRouteThroughOthers(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFrom(t, "hop", `
[lab]
name = "NAME"
[site.a]
[site.b]
[site.c]
[[link]]
sites = ["a", "b"]
delay = "10ms"
[[link]]
sites = ["b", "c"]
delay = "15ms"
`)
	l := up(t, s)
	srv := startServer(t, l.Site("c"))
	checkRTT(t, "a->c via b", l.Site("a"), srv, 10, 50*time.Millisecond, false)
	// The route itself, exactly: every probe crossed both hops each way.
	for _, d := range l.Status().Links {
		for _, dir := range d.Directions {
			if dir.Counters.DeliveredPackets < 10 {
				t.Errorf("%s->%s delivered %d packets, want the 10 probes at least", dir.From, dir.To, dir.Counters.DeliveredPackets)
			}
		}
	}
}

func TestSiteLimitsAndSysctls(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	before, _ := readProc("/proc/sys/net/core/rmem_max")
	s := specFrom(t, "lim", `
[lab]
name = "NAME"
[site.a]
cpu = 0.25
memory = "256MiB"
tcp_rmem = "4096 131072 67108864"
rmem_max = "64MiB"
tcp_window_scaling = false
tcp_congestion = "reno"
[site.b]
[[link]]
sites = ["a", "b"]
delay = "1ms"
`)
	l := up(t, s)
	a := l.Site("a")
	if got := inSite(t, a, "/proc/sys/net/ipv4/tcp_rmem"); strings.Join(strings.Fields(got), " ") != "4096 131072 67108864" {
		t.Errorf("tcp_rmem in a = %q", got)
	}
	if got := inSite(t, a, "/proc/sys/net/ipv4/tcp_window_scaling"); got != "0" {
		t.Errorf("tcp_window_scaling in a = %q, want 0", got)
	}
	if got, _ := readProc("/proc/sys/net/core/rmem_max"); got != "67108864" {
		t.Errorf("root rmem_max = %s, want 67108864 while the lab runs", got)
	}
	var quota, limit string
	for _, cg := range a.Cgroups {
		switch {
		case isV2(cg): // one directory holds both
			max, _ := readProc(filepath.Join(cg, "cpu.max"))
			quota, _, _ = strings.Cut(max, " ")
			limit, _ = readProc(filepath.Join(cg, "memory.max"))
		case filepath.Base(filepath.Dir(cg)) == "cpu":
			quota, _ = readProc(filepath.Join(cg, "cpu.cfs_quota_us"))
		case filepath.Base(filepath.Dir(cg)) == "memory":
			limit, _ = readProc(filepath.Join(cg, "memory.limit_in_bytes"))
		}
	}
	if quota != "25000" || limit != "268435456" {
		t.Errorf("cgroup limits: cpu quota %q (want 25000 of 100000), memory %q (want 268435456)", quota, limit)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := readProc("/proc/sys/net/core/rmem_max"); got != before {
		t.Errorf("root rmem_max = %s after close, want it restored to %s", got, before)
	}
}

func TestCrashedLabIsCleanedUpByDownAndByNextStart(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFile(t, "crash", "examples/two-sites.toml")
	root := t.TempDir()
	l, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, NoControl: true})
	if err != nil {
		t.Fatal(err)
	}
	// Simulate kill -9: the emulator stops, nothing is torn down, and
	// the record points at a process that no longer exists.
	l.emu.Close()
	l.rec.PID, l.rec.PIDStart = 1<<22-1, "0"
	if err := l.rec.save(root); err != nil {
		t.Fatal(err)
	}
	if ns := listNetns(objectPrefix(s.Lab.Name)); len(ns) != 2 {
		t.Fatalf("want the 2 namespaces still there before down, have %v", ns)
	}
	done, err := Down(ctxFor(t, time.Minute), root, s.Lab.Name)
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	t.Logf("down removed: %v", done)
	assertGone(t, root, s.Lab.Name)

	// A new start of the same lab over leftovers works too.
	l2, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, NoControl: true})
	if err != nil {
		t.Fatal(err)
	}
	l2.emu.Close()
	l2.rec.PID, l2.rec.PIDStart = 1<<22-1, "0"
	_ = l2.rec.save(root)
	l3, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, NoControl: true})
	if err != nil {
		t.Fatalf("start over leftovers: %v", err)
	}
	if err := l3.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, root, s.Lab.Name)
}

func TestSecondLabOfSameNameIsRefused(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFile(t, "dup", "examples/two-sites.toml")
	l := up(t, s)
	_, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: filepath.Dir(labDir(l.root, "x"))})
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second lab of the same name: got %v, want 'already running'", err)
	}
	if !netnsExists(l.Site("eu").Netns) {
		t.Fatal("the refused start removed the running lab's namespace")
	}
	_ = os.Getpid
}

func TestSeriesCSVHasOneRowPerDirectionPerSecond(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	s := specFile(t, "csv", "examples/two-sites.toml")
	root := t.TempDir()
	csvPath := filepath.Join(t.TempDir(), "links.csv")
	l, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root, SeriesCSV: csvPath})
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, l.Site("eu"))
	rtt(t, l.Site("primary"), srv, 60) // ~1.2 s of traffic
	time.Sleep(1100 * time.Millisecond)
	srv.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, root, s.Lab.Name)
	b, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != SeriesHeader {
		t.Fatalf("header %q", lines[0])
	}
	cols := len(strings.Split(SeriesHeader, ","))
	seen := map[string]int{}
	var lastDelivered string
	for _, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) != cols {
			t.Fatalf("row %q has %d columns, want %d", line, len(f), cols)
		}
		// The classes' bytes, the last columns, add up to the delivered.
		var byClass int64
		for _, v := range f[cols-int(linkem.NumClasses):] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("row %q: class bytes %q: %v", line, v, err)
			}
			byClass += n
		}
		if delivered := f[5]; strconv.FormatInt(byClass, 10) != delivered {
			t.Errorf("row %q: bytes by class sum to %d, delivered_bytes %s", line, byClass, delivered)
		}
		seen[f[1]]++
		if f[1] == "primary->eu" {
			lastDelivered = f[4]
		}
	}
	if seen["primary->eu"] < 2 || seen["eu->primary"] < 2 {
		t.Errorf("rows per direction %v, want at least 2 each (one per second plus the final sample)", seen)
	}
	if lastDelivered == "0" || lastDelivered == "" {
		t.Errorf("primary->eu delivered_packets in the last row = %q, want the probes counted", lastDelivered)
	}
}

func TestFailedStartRemovesWhatItCreated(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	// The second site's congestion control does not exist: the lab fails
	// after the first site's namespace was created.
	s := specFrom(t, "fail", `
[lab]
name = "NAME"
[site.a]
[site.b]
tcp_congestion = "nosuchcc"
[[link]]
sites = ["a", "b"]
delay = "1ms"
`)
	root := t.TempDir()
	_, err := Up(ctxFor(t, time.Minute), s, Options{StateRoot: root})
	if err == nil || !strings.Contains(err.Error(), "nosuchcc") {
		t.Fatalf("want an error naming the congestion control, got %v", err)
	}
	assertGone(t, root, s.Lab.Name)
}
