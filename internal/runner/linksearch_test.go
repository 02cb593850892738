package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/labtest"
	"replab/internal/report"
	"replab/internal/workload"
	"replab/internal/workload/personnel"
)

// readLinkSearch reads linksearch.json of a results directory.
func readLinkSearch(t *testing.T, dir string) report.LinkSearch {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "linksearch.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ls report.LinkSearch
	if err := json.Unmarshal(b, &ls); err != nil {
		t.Fatal(err)
	}
	return ls
}

// A link search on the fake engine, whose changes cross the (offline)
// lab's link with its delay as set at the time: the largest one-way delay
// that keeps the standby's lag p99 within 180 ms, the fake adding 5 ms of
// its own, at 200 transactions a second. Every probe's verdict is far from
// the bound — a lag is at least the delay plus 5 ms, so 800 ms misses 720;
// the watcher's polls and a busy machine add to the p99 (20 ms on a quiet
// one, 234 ms beside a loaded suite), and 400 ms keeps it with 315 ms to
// spare — and the probes are exact: the ends, then 800 ms, then 400 ms,
// which leaves a bracket of the resolution.
func TestFakeLinkSearchFindsTheLargestDelay(t *testing.T) {
	t.Parallel()
	sum, out, log, err := fakeRun(t, fakeSpec("", `rate = "200/s"
search = "link[1].delay"
search_range = ["0ms", "1600ms"]
search_resolution = "400ms"
search_max_lag_p99 = "720ms"
`))
	if err != nil {
		t.Fatal(err)
	}
	ls := readLinkSearch(t, out)
	var values []float64
	var passes []bool
	for _, p := range ls.Probes {
		values = append(values, p.Value)
		passes = append(passes, p.Pass)
		if _, err := os.Stat(filepath.Join(out, p.Dir, "summary.json")); err != nil {
			t.Errorf("probe %s: %v", p.Dir, err)
		}
	}
	for _, p := range ls.Probes {
		t.Logf("probe %s: %s pass %v lag p99 %.1f ms: %s", p.Dir, p.Text, p.Pass, deref(p.LagP99Ms), p.Why)
	}
	if want := []float64{0, 1600, 800, 400}; !reflect.DeepEqual(values, want) {
		t.Fatalf("probes at %v ms, want %v", values, want)
	}
	if want := []bool{true, false, false, true}; !reflect.DeepEqual(passes, want) {
		t.Errorf("verdicts %v, want %v", passes, want)
	}
	for _, p := range ls.Probes {
		if p.LagP99Ms == nil || *p.LagP99Ms < p.Value+5 {
			t.Errorf("probe at %v ms: lag p99 %v, want at least the delay plus the fake's 5 ms", p.Value, p.LagP99Ms)
		}
	}
	if !ls.Complete || ls.Answer == nil || *ls.Answer != 400 || ls.Bracket == nil || *ls.Bracket != 800 || ls.Want != "largest" || ls.Unit != "ms" {
		t.Errorf("answer %v, bracket %v, complete %v, want %q %q: want 400 within [400, 800)", deref(ls.Answer), deref(ls.Bracket), ls.Complete, ls.Want, ls.Unit)
	}
	// The summary is the answer's probe, with the search in it.
	if sum["complete"] != true || sum["link_search"] == nil || num(t, sum, "replicas", "s", "lag_ms", "p50") < 405 {
		t.Errorf("summary: complete %v, lag p50 %v, link_search %v", sum["complete"], num(t, sum, "replicas", "s", "lag_ms", "p50"), sum["link_search"] != nil)
	}
	for _, w := range []string{"=== link search probe 4: a<->b delay=400ms", "links: a<->b at delay=0ms until every replica has caught up", "link search: 4 probes measured"} {
		if !strings.Contains(log, w) {
			t.Errorf("the log lacks %q", w)
		}
	}
	var b strings.Builder
	s := &report.Summary{}
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(out, "summary.json"))), s); err != nil {
		t.Fatal(err)
	}
	report.PrintSummary(&b, s)
	for _, w := range []string{"link search over link[1].delay (a<->b): the largest value in [0, 1600] ms", "400ms", "← answer",
		"probe 2 (1600ms) missed: replication lag p99", "answer: the largest delay that keeps the bounds is 400ms, to within 400ms: 400ms kept them, 800ms did not",
		"the answer, probe 4 (400ms, probe-04):"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("the end-of-run table lacks %q:\n%s", w, b.String())
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func deref(f *float64) float64 {
	if f == nil {
		return -1
	}
	return *f
}

const linkSearchPGSpec = `
[lab]
name = "%s"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "10ms"
[engine]
kind = "postgres"
[node.p1]
site = "a"
role = "primary"
[node.s1]
site = "b"
role = "standby"
from = "p1"
[workload]
kind = "personnel"
persons = 200
[run]
rate = "20/s"
users = 2
warmup = "1s"
duration = "2s"
cooldown = "0s"
lag_sample = 1
search = "link[1].delay"
search_range = ["0ms", "1600ms"]
search_resolution = "400ms"
search_max_lag_p99 = "720ms"
`

// TestLinkSearchOnPostgres: a PostgreSQL standby's lag against the delay
// of its link, set on the running link probe by probe: the largest delay
// that keeps its lag p99 within 720 ms. The first three probes are fixed by
// the link alone — no lag can be shorter than the one-way delay, so 1600
// and 800 ms miss, and 0 ms keeps it unless the machine delays a standby's
// replay by 720 ms — and the fourth, 400 ms, keeps the bound unless it
// delays it by 320 ms; either way the search ends there, with a bracket
// of 400 ms. The margins are the machine's: the test runs beside the
// others (at 180 ms, 0 ms kept the bound only on a machine to itself).
// One lab, four probes of 3 s: well under a minute.
func TestLinkSearchOnPostgres(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	start := time.Now()
	sum, out, log := runFaults(t, fmt.Sprintf(linkSearchPGSpec, labtest.UniqueName("tlsrch")), nil,
		Options{Engines: engine.NewRegistry(postgres.Engine{}), Workloads: workload.NewRegistry(personnel.Factory)})
	ls := sum.LinkSearch
	if ls == nil {
		t.Fatalf("no link search in the summary\n%s", log)
	}
	var b strings.Builder
	report.PrintLinkSearch(&b, ls)
	t.Logf("in %s:\n%s", time.Since(start).Round(time.Second), b.String())
	if len(ls.Probes) != 4 {
		t.Fatalf("%d probes, want 4\n%s", len(ls.Probes), log)
	}
	for i, want := range []struct {
		value float64
		pass  bool
	}{{0, true}, {1600, false}, {800, false}} {
		if p := ls.Probes[i]; p.Value != want.value || p.Pass != want.pass {
			t.Errorf("probe %d at %v ms kept the bound: %v (%s); want %v ms, %v", i+1, p.Value, p.Pass, p.Why, want.value, want.pass)
		}
	}
	for _, p := range ls.Probes {
		if p.LagP99Ms == nil || *p.LagP99Ms < p.Value {
			t.Errorf("probe at %v ms: standby lag p99 %v ms, shorter than the link's one-way delay", p.Value, deref(p.LagP99Ms))
		}
		if _, err := os.Stat(filepath.Join(out, p.Dir, "summary.json")); err != nil {
			t.Errorf("probe %s: %v", p.Dir, err)
		}
	}
	last := ls.Probes[3]
	answer, bracket := 400.0, 800.0
	if !last.Pass {
		answer, bracket = 0, 400
	}
	if last.Value != 400 || !ls.Complete || ls.Answer == nil || *ls.Answer != answer || ls.Bracket == nil || *ls.Bracket != bracket {
		t.Errorf("probe 4 at %v ms (kept: %v); answer %v, bracket %v; want %v and %v", last.Value, last.Pass, deref(ls.Answer), deref(ls.Bracket), answer, bracket)
	}
}
