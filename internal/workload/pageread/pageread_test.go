package pageread

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"replab/internal/driver"
	"replab/internal/engine"
	"replab/internal/engine/xrootd"
	"replab/internal/lab"
	"replab/internal/labtest"
	"replab/internal/pagestats"
	"replab/internal/spec"
	"replab/internal/testkit"
	"replab/internal/workload"
)

// A server and a client 100 ms apart (round trip) on a 20 Mbit/s link:
// an 8 KiB page takes 3.3 ms to serialize, so the round trip dominates.
var linkSpec = testkit.ReadFile("testdata/link.toml")

func requireXRootD(t *testing.T) {
	t.Helper()
	testkit.Need(t, testkit.Lab, testkit.XRootD)
}

// newWorkload builds the workload from [workload] lines.
func newWorkload(t *testing.T, lines string) *Workload {
	t.Helper()
	text := strings.Replace(linkSpec, `name = "NAME"`, `name = "w"`, 1) + "[workload]\nkind = \"page-read\"\n" + lines
	s, err := spec.Parse("w.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	w, err := workload.NewRegistry(Factory).For(s, "")
	if err != nil {
		t.Fatal(err)
	}
	return w.(*Workload)
}

// measured is one driven measurement of the workload.
type measured struct {
	sum   *pagestats.Summary
	rows  []pagestats.Row
	conns []int // established connections at the server, sampled during the measure phase
}

// drive connects w from the client site, drives it with users for a
// warmup and a measure phase, calls during(ctx) at the start of the
// measure phase, and returns what PageReport made of it.
func drive(t *testing.T, l *lab.Lab, c engine.Cluster, w *Workload, users int, warmup, measure time.Duration, during func(ctx context.Context)) measured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := workload.ConnectEnv{Cluster: c, Nodes: c.Nodes(), Dial: l.Site("cli").DialContext, Users: users,
		SiteDo: func(site string, f func() error) error { return l.Site(site).Do(f) }}
	if err := w.Connect(ctx, env); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var m measured
	var wg sync.WaitGroup
	start := time.Now()
	from := start.Add(warmup)
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-time.After(time.Until(from)):
		case <-ctx.Done():
			return
		}
		if during != nil {
			during(ctx)
		}
		for range 3 {
			m.conns = append(m.conns, established(t, l.Site("srv"), int(c.Nodes()[0].Addr.Port())))
			time.Sleep(measure / 5)
		}
	}()
	cfg := driver.Config{Users: users, Warmup: warmup, Duration: measure, MaxErrorPct: 100}
	res, err := driver.Run(ctx, cfg, w.Transactions(), nil)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors > 0 {
		t.Fatalf("%d pages failed: %+v", res.Errors, res.Types["page"].Errors)
	}
	dir := t.TempDir()
	if m.sum, err = w.PageReport(dir, from, from.Add(measure)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "pages.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m.rows, err = pagestats.ReadCSV(f); err != nil {
		t.Fatal(err)
	}
	return m
}

// established counts the TCP connections established to port in site
// (the server's side), with ss from iproute2.
func established(t *testing.T, site *lab.Site, port int) int {
	cmd := exec.Command("ss", "-Htn", "state", "established", "( sport = :"+strconv.Itoa(port)+" )")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := site.Start(cmd); err != nil {
		t.Errorf("ss: %v", err)
		return -1
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("ss: %v", err)
		return -1
	}
	return len(strings.Fields(strings.TrimSpace(out.String()))) / 4 // Recv-Q Send-Q local peer
}

// TestPagesAcrossALink: one page at a time, a page takes at least a round
// trip; eight in flight on one connection read at least four times as many
// pages a second, on exactly one TCP connection; a connection per user
// makes eight; every page is the data set's.
func TestPagesAcrossALink(t *testing.T) {
	requireXRootD(t)
	l, c := labtest.Cluster(t, xrootd.Engine{}, "pgread", linkSpec)

	seq := drive(t, l, c, newWorkload(t, ""), 1, time.Second, 4*time.Second, nil)
	if seq.sum.Pages < 10 {
		t.Fatalf("one at a time: only %d pages", seq.sum.Pages)
	}
	for _, r := range seq.rows {
		if r.Measured && r.TimeMs < 100 {
			t.Errorf("page %d took %.1f ms, less than the 100 ms round trip", r.Index, r.TimeMs)
		}
	}
	// Sequential order: page numbers follow each other.
	for i, r := range seq.rows {
		if r.Index != int64(i) {
			t.Fatalf("row %d read page %d", i, r.Index)
		}
	}

	k8 := drive(t, l, c, newWorkload(t, ""), 8, time.Second, 4*time.Second, nil)
	if ratio := k8.sum.PagesPerS / seq.sum.PagesPerS; ratio < 4 {
		t.Errorf("8 in flight: %.1f pages/s, %.2f× one at a time (%.1f); want at least 4×", k8.sum.PagesPerS, ratio, seq.sum.PagesPerS)
	}
	if k8.sum.Connections != 1 {
		t.Errorf("shared: the workload made %d connections", k8.sum.Connections)
	}
	for _, n := range k8.conns {
		if n != 1 {
			t.Errorf("shared: %d connections established at the server (samples %v), want 1", n, k8.conns)
			break
		}
	}

	per := drive(t, l, c, newWorkload(t, `connections = "per-user"`+"\norder = \"random\"\n"), 8, time.Second, 3*time.Second, nil)
	for _, n := range per.conns {
		if n != 8 {
			t.Errorf("per-user: %d connections established at the server (samples %v), want 8", n, per.conns)
			break
		}
	}
	seen := map[int]bool{}
	for _, r := range per.rows {
		seen[r.Conn] = true
	}
	if len(seen) != 8 || per.sum.Connections != 8 {
		t.Errorf("per-user: pages came over %d connections (summary %d), want 8", len(seen), per.sum.Connections)
	}
}

// TestSlowPagesFromALossBurst: a burst of loss on the server's direction
// in the middle of the measure phase plants slow pages there, and the
// detector finds them there, not before.
func TestSlowPagesFromALossBurst(t *testing.T) {
	requireXRootD(t)
	l, c := labtest.Cluster(t, xrootd.Engine{}, "pgslow", linkSpec)
	const burstAt, burstFor = 3 * time.Second, 3 * time.Second
	burst := func(ctx context.Context) {
		go func() {
			select {
			case <-time.After(burstAt):
			case <-ctx.Done():
				return
			}
			if err := l.SetLink("srv", "cli", false, []string{"loss=15%"}); err != nil {
				t.Error(err)
			}
			select {
			case <-time.After(burstFor):
			case <-ctx.Done():
			}
			if err := l.SetLink("srv", "cli", false, []string{"loss=0%"}); err != nil {
				t.Error(err)
			}
		}()
	}
	m := drive(t, l, c, newWorkload(t, ""), 1, time.Second, 10*time.Second, burst)
	var in, before int
	lo, hi := burstAt.Seconds()-0.3, (burstAt+burstFor).Seconds()+1.5
	for _, r := range m.rows {
		if !r.Slow {
			continue
		}
		switch {
		case r.StartS >= lo && r.StartS <= hi:
			in++
		case r.StartS < lo:
			before++
		}
	}
	if in < 2 || before > in/2 {
		t.Errorf("slow pages: %d in the burst (%.1f–%.1f s), %d before it; want at least 2 in and few before (%+v)", in, lo, hi, before, m.sum.Slow)
	}
	if m.sum.Slow.SlowPages != int64(in+before+countAfter(m.rows, hi)) {
		t.Errorf("summary counts %d slow pages, pages.csv marks %d", m.sum.Slow.SlowPages, in+before+countAfter(m.rows, hi))
	}
	// The server's side of the connection: it retransmitted, and its
	// window after the burst's first slow page is below its largest before.
	if m.sum.Slow.RetransDuring == 0 {
		t.Errorf("15%% loss for %s, and the server retransmitted nothing", burstFor)
	}
	var maxBefore uint32
	minAfter := uint32(1 << 31)
	for _, r := range m.rows {
		if r.CwndSegments == 0 {
			t.Fatalf("page %d: no TCP state from the server's socket", r.Index)
		}
		if r.StartS < lo {
			maxBefore = max(maxBefore, r.CwndSegments)
		} else if r.StartS <= hi {
			minAfter = min(minAfter, r.CwndSegments)
		}
	}
	if minAfter >= maxBefore {
		t.Errorf("the server's window never fell in the burst: at most %d segments before, at least %d in it", maxBefore, minAfter)
	}
}

func countAfter(rows []pagestats.Row, hi float64) int {
	n := 0
	for _, r := range rows {
		if r.Slow && r.StartS > hi {
			n++
		}
	}
	return n
}
