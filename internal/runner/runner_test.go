package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"replab/internal/testkit"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"replab/internal/engine/postgres/pgtest"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/labtest"
	"replab/internal/livemetrics"
	"replab/internal/report"
	"replab/internal/spec"
	"replab/internal/workload"
	"replab/internal/workload/kvinsert"
	"replab/internal/workload/personnel"
)

// runSpec runs spec text (with %s replaced by a unique lab name) and
// returns summary.json as a generic map plus the results directory.
func runSpec(t *testing.T, ctx context.Context, text string) (map[string]any, string, error) {
	t.Helper()
	return runSpecLog(t, ctx, text, &logWatch{})
}

// logWatch is a run's log that can be read while the run writes it, and
// closes seen once a line starting with want was written.
type logWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *logWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.seen != nil && w.want != "" && (strings.HasPrefix(w.buf.String(), w.want) || strings.Contains(w.buf.String(), "\n"+w.want)) {
		close(w.seen)
		w.want = ""
	}
	return len(p), nil
}

func (w *logWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// runSpecLog is runSpec writing the run's log to log.
func runSpecLog(t *testing.T, ctx context.Context, text string, log *logWatch) (map[string]any, string, error) {
	t.Helper()
	return runSpecWith(t, ctx, text, log, nil)
}

// runSpecWith is runSpecLog with the options changed by opt first.
func runSpecWith(t *testing.T, ctx context.Context, text string, log *logWatch, opt func(*Options)) (map[string]any, string, error) {
	t.Helper()
	name := labtest.UniqueName("trun")
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(text, name)), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	o := Options{
		Out: out, StateRoot: t.TempDir(), DataRoot: t.TempDir(), Log: log, Version: "test",
		Engines: engine.NewRegistry(postgres.Engine{}), Workloads: workload.NewRegistry(personnel.Factory, kvinsert.Factory),
	}
	if opt != nil {
		opt(&o)
	}
	_, _, runErr := Run(ctx, s, o)
	t.Logf("run log:\n%s", log.String())
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatalf("summary.json missing (run error %v): %v", runErr, err)
	}
	var sum map[string]any
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	return sum, out, runErr
}

func num(t *testing.T, m map[string]any, keys ...string) float64 {
	t.Helper()
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v: not an object at %q", keys, k)
		}
		if v, ok = mm[k]; !ok {
			t.Fatalf("summary.json has no %v", keys)
		}
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%v = %v is not a number", keys, v)
	}
	return f
}

const lowLoadSpec = `
[lab]
name = "%s"
[site.primary]
[site.eu]
[[link]]
sites = ["primary", "eu"]
delay = "50ms"
rate = "100mbit"
[engine]
kind = "postgres"
[node.p1]
site = "primary"
role = "primary"
[node.e1]
site = "eu"
role = "standby"
from = "p1"
[workload]
kind = "personnel"
persons = 500
[run]
rate = "20/s"
arrival = "regular"
users = 2
warmup = "1s"
duration = "4s"
cooldown = "1s"
`

func TestRunWritesTheSummaryContractAndLagIsAtLeastTheLinkDelay(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Live metrics are scraped while it runs (checked at the end).
	scrapes := make(chan map[string]*dto.MetricFamily, 1000)
	var scraping sync.WaitGroup
	sum, out, err := runSpecWith(t, ctx, lowLoadSpec, &logWatch{}, func(o *Options) {
		o.Metrics = "127.0.0.1:0"
		o.MetricsReady = func(addr string) {
			scraping.Add(1)
			go func() {
				defer scraping.Done()
				for {
					mfs, err := livemetrics.Scrape(ctx, "http://"+addr+"/metrics")
					if err != nil {
						return // the run ended: the server is gone
					}
					scrapes <- mfs
					time.Sleep(250 * time.Millisecond)
				}
			}()
		}
	})
	scraping.Wait()
	close(scrapes)
	checkLiveMetrics(t, scrapes)
	if err != nil {
		t.Fatal(err)
	}
	if sum["complete"] != true {
		t.Fatalf("complete = %v (%v)", sum["complete"], sum["stop_reason"])
	}
	tx := num(t, sum, "transactions")
	if tx < 60 || tx > 100 {
		t.Errorf("transactions %v at 20/s for 4 s, want ~80", tx)
	}
	if got := num(t, sum, "tpm"); got != tx/4*60 {
		t.Errorf("tpm %v for %v transactions in 4 s", got, tx)
	}
	if rows := num(t, sum, "rows_changed"); rows != tx {
		t.Errorf("rows_changed %v != transactions %v", rows, tx)
	}
	for _, k := range []string{"p50", "p95", "p99", "max"} {
		if num(t, sum, "commit_latency_ms", k) <= 0 {
			t.Errorf("commit_latency_ms.%s is not positive", k)
		}
	}
	// Lag at e1, 50 ms away: never below the delay, and at low load about
	// it, not a multiple of it (a loaded machine delays replay and polls
	// by tens of ms: the bound is generous on purpose, the floor is exact).
	p50, minLag := num(t, sum, "replicas", "e1", "lag_ms", "p50"), num(t, sum, "replicas", "e1", "lag_min_ms")
	if minLag < 50 || p50 < 50 || p50 >= 150 {
		t.Errorf("lag at e1 min %.2f p50 %.2f ms, want ≥ 50 and p50 < 150 behind a 50 ms link", minLag, p50)
	}
	if num(t, sum, "replicas", "e1", "not_visible_at_end") != 0 {
		t.Errorf("transactions still not visible at e1 at the end")
	}
	// 20/s is twice the automatic sample's budget (driver.DefaultLagBudget,
	// 10/s): each of the 2 users tracks every second transaction.
	if rep, tracked := sum["replicas"].(map[string]any)["e1"].(map[string]any), num(t, sum, "replicas", "e1", "tracked"); rep["sample"] != "auto" || num(t, sum, "replicas", "e1", "sample_every") != 2 ||
		tracked < tx/2-2 || tracked > tx/2+2 {
		t.Errorf("lag sample %v every %v, tracked %v of %v: want auto, every second transaction", rep["sample"], rep["sample_every"], rep["tracked"], tx)
	}
	// The achieved poll interval is a benchmark figure: here only that
	// polls were chained at about the 1 ms interval, not a multiple of it.
	if res := num(t, sum, "replicas", "e1", "resolution_ms"); res <= 0 || res > 10 {
		t.Errorf("resolution %.2f ms, want about 1 (at most 10 on a busy machine)", res)
	}
	for _, f := range []string{"series.csv", "lag.csv", "links.csv", "latency.hlog", "environment.json", "resolved-spec.json", "spec.toml"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("results file %s missing or empty", f)
		}
	}
	env, _ := os.ReadFile(filepath.Join(out, "environment.json"))
	var e map[string]any
	_ = json.Unmarshal(env, &e)
	if e["kernel"] == "" || e["engine_version"] == "" || e["replab_version"] != "test" {
		t.Errorf("environment %v", e)
	}
}

// checkLiveMetrics: scrapes made in the measure phase show the
// transactions counter rising, commit latencies and lags at e1 observed,
// and bytes on the primary's link to eu.
func checkLiveMetrics(t *testing.T, scrapes <-chan map[string]*dto.MetricFamily) {
	t.Helper()
	var first, last map[string]*dto.MetricFamily
	n := 0
	for mfs := range scrapes {
		if livemetrics.Sum(mfs["replab_phase"], "phase", "measure") != 1 {
			continue
		}
		n++
		if first == nil {
			first = mfs
		}
		last = mfs
	}
	if n < 2 {
		t.Fatalf("%d scrapes in the measure phase, want at least 2", n)
	}
	tx0, tx1 := livemetrics.Sum(first["replab_transactions_total"]), livemetrics.Sum(last["replab_transactions_total"])
	if !(tx1 > tx0) {
		t.Errorf("replab_transactions_total went from %v to %v over %d scrapes of the measure phase: want it rising", tx0, tx1, n)
	}
	if c := livemetrics.Sum(last["replab_commit_latency_seconds"]); c <= 0 {
		t.Errorf("replab_commit_latency_seconds has %v observations", c)
	}
	if c := livemetrics.Sum(last["replab_lag_seconds"], "replica", "e1"); c <= 0 {
		t.Errorf("replab_lag_seconds{replica=e1} has %v observations", c)
	}
	if b := livemetrics.Sum(last["replab_link_delivered_bytes_total"], "direction", "primary->eu"); b <= 0 {
		t.Errorf("replab_link_delivered_bytes_total{direction=primary->eu} = %v", b)
	}
	if livemetrics.Sum(last["replab_run_info"], "engine", "postgres", "workload", "personnel") != 1 {
		t.Errorf("replab_run_info: %v", last["replab_run_info"])
	}
}

func TestInterruptedRunStillWritesResultsMarkedIncomplete(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Interrupt once the lab is built and the measure phase has begun:
	// the driver starts ("running …"), its 1 s warmup passes, then 1 s
	// more, however long a busy machine took to get there.
	log := &logWatch{want: "running ", seen: make(chan struct{})}
	go func() {
		select {
		case <-log.seen:
			time.Sleep(2 * time.Second)
			cancel()
		case <-ctx.Done():
		}
	}()
	sum, _, err := runSpecLog(t, ctx, `
[lab]
name = "%s"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "5ms"
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
kind = "kv-insert"
[run]
users = 2
warmup = "1s"
duration = "10m"
`, log)
	if err == nil {
		t.Error("an interrupted run returned no error")
	}
	if sum["complete"] != false {
		t.Errorf("complete = %v, want false", sum["complete"])
	}
	if r, _ := sum["stop_reason"].(string); r == "" {
		t.Error("no stop_reason")
	}
	select {
	case <-log.seen:
	default:
		t.Error("the run ended before its driver started")
	}
}

var smallSpec = testkit.ReadFile("testdata/small.toml")

// TestSweepOfRepetitionsOnPostgres: a sweep over the link's delay, each
// point repeated twice, on real servers — one run of what the fake engine
// proves piece by piece (TestFakeSweepRunsEveryPoint,
// TestFakeRepetitionsAggregate). Every point's lag is at least its delay;
// every point aggregates its repetitions with confidence intervals, the
// lag's too; every repetition chose its lag sample from its own warmup and
// tracked that share of its transactions.
func TestSweepOfRepetitionsOnPostgres(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	name := labtest.UniqueName("tswp")
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.toml")
	text := fmt.Sprintf(smallSpec, name) + "repetitions = 2\n\n[sweep]\n\"link[1].delay\" = [\"5ms\", \"30ms\"]\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	out := filepath.Join(dir, "results")
	_, _, err = Run(ctx, s, Options{
		Out: out, StateRoot: t.TempDir(), DataRoot: t.TempDir(), Log: &log, Version: "test",
		Engines: engine.NewRegistry(postgres.Engine{}), Workloads: workload.NewRegistry(personnel.Factory, kvinsert.Factory),
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sw struct {
		Complete bool
		Points   []struct {
			Label   string
			Dir     string
			Summary map[string]any
		}
	}
	if err := json.Unmarshal(b, &sw); err != nil {
		t.Fatal(err)
	}
	if !sw.Complete || len(sw.Points) != 2 {
		t.Fatalf("sweep complete %v with %d points", sw.Complete, len(sw.Points))
	}
	for _, p := range sw.Points {
		lag := num(t, p.Summary, "lag_p50_ms", "s1")
		wantMin := 5.0
		if strings.Contains(p.Label, "30ms") {
			wantMin = 30
		}
		if lag < wantMin {
			t.Errorf("%s: lag p50 %.2f ms below the link delay %.0f ms", p.Label, lag, wantMin)
		}
		checkRepetitions(t, p.Label, filepath.Join(out, p.Dir), 2)
	}
	if !strings.Contains(log.String(), "link[1].delay") {
		t.Errorf("no sweep table in the output:\n%s", log.String())
	}
}

// checkRepetitions checks the aggregate of n repetitions in dir and each
// repetition's summary.
func checkRepetitions(t *testing.T, label, dir string, n int) {
	t.Helper()
	var sum map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	_ = json.Unmarshal(b, &sum)
	if sum["kind"] != "repetitions" || sum["complete"] != true {
		t.Fatalf("%s: kind %v complete %v (%v)", label, sum["kind"], sum["complete"], sum["stop_reason"])
	}
	if got := num(t, sum, "tpm_ci", "n"); got != float64(n) {
		t.Errorf("%s: tpm_ci.n = %v, want %d", label, got, n)
	}
	mean, half := num(t, sum, "tpm_ci", "mean"), num(t, sum, "tpm_ci", "half_width")
	if mean <= 0 || half <= 0 || num(t, sum, "tpm_ci", "level") != 0.95 {
		t.Errorf("%s: tpm_ci mean %v half %v", label, mean, half)
	}
	if num(t, sum, "tpm") != mean {
		t.Errorf("%s: tpm %v is not the mean %v", label, num(t, sum, "tpm"), mean)
	}
	if num(t, sum, "ci", "replicas.s1.lag_ms.p50", "n") != float64(n) {
		t.Errorf("%s: no CI for the replica's lag", label)
	}
	var tpms float64
	for i := 1; i <= n; i++ {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rep-%02d", i), "summary.json"))
		if err != nil {
			t.Fatalf("%s: repetition %d: %v", label, i, err)
		}
		var rep map[string]any
		_ = json.Unmarshal(b, &rep)
		if rep["complete"] != true || num(t, rep, "replicas", "s1", "not_visible_at_end") != 0 {
			t.Errorf("%s: repetition %d: %v", label, i, rep["stop_reason"])
		}
		// The default automatic sample, chosen from each warmup's rate:
		// each user tracks every Nth transaction.
		every, tx, tracked := num(t, rep, "replicas", "s1", "sample_every"), num(t, rep, "transactions"), num(t, rep, "replicas", "s1", "tracked")
		t.Logf("%s: repetition %d: %v transactions, sample every %v, %v tracked", label, i, tx, every, tracked)
		if rep["replicas"].(map[string]any)["s1"].(map[string]any)["sample"] != "auto" || every < 1 || tracked < tx/every-4 || tracked > tx/every+4 {
			t.Errorf("%s: repetition %d: sample every %v, tracked %v of %v", label, i, every, tracked, tx)
		}
		if got := num(t, sum["repetitions"].([]any)[i-1].(map[string]any), "lag_sample_every"); got != every {
			t.Errorf("%s: repetition %d: lag_sample_every %v in the aggregate, %v in its summary", label, i, got, every)
		}
		tpms += num(t, rep, "tpm")
	}
	if d := tpms/float64(n) - mean; d > 1e-6 || d < -1e-6 {
		t.Errorf("%s: mean of repetitions %v != tpm_ci.mean %v", label, tpms/float64(n), mean)
	}
}

func TestLagSampleTracksEveryKthTransaction(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, _, err := runSpec(t, ctx, smallSpec+"lag_sample = 4\n")
	if err != nil {
		t.Fatal(err)
	}
	tx, tracked := num(t, sum, "transactions"), num(t, sum, "replicas", "s1", "tracked")
	// Each of the 2 users tracks its 4th, 8th, … transaction; warmup and
	// cooldown shift the counts by at most a few per user.
	if tracked < tx/4-4 || tracked > tx/4+4 || num(t, sum, "replicas", "s1", "sample_every") != 4 {
		t.Errorf("tracked %v of %v transactions with lag_sample = 4", tracked, tx)
	}
	if s := sum["replicas"].(map[string]any)["s1"].(map[string]any)["sample"]; s != "fixed" {
		t.Errorf("sample %v, want fixed", s)
	}
	if num(t, sum, "replicas", "s1", "not_visible_at_end") != 0 || num(t, sum, "replicas", "s1", "lag_ms", "p50") < 5 {
		t.Errorf("lag of sampled transactions: %v", sum["replicas"])
	}
}

func TestPartialLogicalReplicaLagIsMeasured(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The partial replica lists only per: the lag probe's table must reach
	// it anyway, or none of its lag could be measured.
	sum, _, err := runSpec(t, ctx, `
[lab]
name = "%s"
[site.hq]
[site.ship]
[[link]]
sites = ["hq", "ship"]
delay = "20ms"
[engine]
kind = "postgres"
[node.p1]
site = "hq"
role = "primary"
[node.part]
site = "ship"
role = "replica"
from = "p1"
[[node.part.table]]
name = "per"
columns = ["per_id", "per_last_nm"]
[scheme]
replication = "logical"
[workload]
kind = "personnel"
persons = 300
[run]
users = 2
warmup = "500ms"
duration = "2s"
cooldown = "0s"
`)
	if err != nil {
		t.Fatal(err)
	}
	if nv := num(t, sum, "replicas", "part", "not_visible_at_end"); nv != 0 {
		t.Errorf("%v transactions not visible at the partial replica", nv)
	}
	if p50 := num(t, sum, "replicas", "part", "lag_ms", "p50"); p50 < 20 {
		t.Errorf("lag p50 %.2f ms behind a 20 ms link", p50)
	}
}

// TestMultiMasterLagSkipsEachMastersOwnUsers: two masters 20 ms apart,
// one user writing at each (the client sits in m1's site, so user 1's
// transactions cross the link to m2). Each master's lag covers only the
// other master's user: at least the link's 20 ms, never the ~0 of its own
// commits, and its tracked count is that user's alone.
func TestMultiMasterLagSkipsEachMastersOwnUsers(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	pgtest.RequirePglogical(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sum, _, err := runSpec(t, ctx, `
[lab]
name = "%s"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "20ms"
[engine]
kind = "postgres"
[node.m1]
site = "a"
role = "master"
[node.m2]
site = "b"
role = "master"
[scheme]
replication = "multimaster"
[workload]
kind = "kv-insert"
[run]
users = 2
warmup = "1s"
duration = "3s"
cooldown = "0s"
lag_sample = 1
`)
	if err != nil {
		t.Fatal(err)
	}
	t1, t2 := num(t, sum, "replicas", "m1", "tracked"), num(t, sum, "replicas", "m2", "tracked")
	tx := num(t, sum, "transactions")
	// m1 watches user 1 (writing at m2 across the link: a few per second),
	// m2 watches user 0 (local to the client: most of the transactions).
	if t1 <= 0 || t2 <= 0 || t1+t2 != tx || t1 >= t2 {
		t.Errorf("tracked at m1 %v, at m2 %v, of %v transactions: want each master to track the other's user only", t1, t2, tx)
	}
	for _, m := range []string{"m1", "m2"} {
		if p50 := num(t, sum, "replicas", m, "lag_ms", "p50"); p50 < 20 {
			t.Errorf("%s: lag p50 %.2f ms, below the 20 ms link: its own users' commits were counted", m, p50)
		}
		if nv := num(t, sum, "replicas", m, "not_visible_at_end"); nv != 0 {
			t.Errorf("%s: %v not visible at the end", m, nv)
		}
	}
}

// TestLookupsAtAStandby: personnel's read-only lookup at the standby, its
// update at the primary. Reads at a hot standby work (they would fail if
// they carried the lag stamp, an UPDATE), and only updates are tracked.
func TestLookupsAtAStandby(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum, out, err := runSpec(t, ctx, strings.Replace(smallSpec, `kind = "kv-insert"`, "kind = \"personnel\"\npersons = 300\nread_pct = 50\nreads_at = \"replica\"", 1)+"lag_sample = 1\nclient = \"b\"\n")
	if err != nil {
		t.Fatal(err)
	}
	updates, lookups := num(t, sum, "types", "update", "count"), num(t, sum, "types", "lookup", "count")
	if updates == 0 || lookups == 0 || num(t, sum, "errors") != 0 {
		t.Fatalf("updates %v, lookups %v, errors %v (%v)", updates, lookups, num(t, sum, "errors"), sum["types"])
	}
	if tr := num(t, sum, "replicas", "s1", "tracked"); tr != updates {
		t.Errorf("tracked %v, want the %v updates only", tr, updates)
	}
	// The client sits in b with the standby: a lookup is local, an update
	// crosses the 5 ms link to the primary and back, so none is faster
	// than that 10 ms round trip (exact), and a lookup that went to the
	// primary would not be either. How fast lookups are on a busy machine
	// is not the point: the fastest is.
	res, err := report.ReadResults(out)
	if err != nil {
		t.Fatal(err)
	}
	lh, uh := res.Hists["type_lookup"], res.Hists["type_update"]
	if lh == nil || uh == nil {
		t.Fatalf("latency.hlog has no type_lookup or type_update: %v", res.Problems)
	}
	// Values are µs; a histogram bucket at 10 ms is 8 µs wide.
	if lmin, umin := lh.Min(), uh.Min(); lmin >= 10_000-8 || umin < 10_000-8 {
		t.Errorf("fastest lookup %.2f ms, fastest update %.2f ms: want lookups local at the standby, updates ≥ one 10 ms round trip", float64(lmin)/1e3, float64(umin)/1e3)
	}
}

// TestSerialLineLabIsProvisionedFastAndMeasuredSlow: a standby behind a
// 9.6 kbit/s line. Its base backup would take over an hour across it; the
// lab is built over unshaped links instead, then measured across the
// serial line: the lag shows its serialisation (a ~600-byte change takes
// ≥ 0.5 s at 9.6 kbit/s), and the link carried the stream at its rate.
func TestSerialLineLabIsProvisionedFastAndMeasuredSlow(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sum, _, err := runSpec(t, ctx, `
[lab]
name = "%s"
[site.master]
[site.snap]
[[link]]
sites = ["master", "snap"]
preset = "serial-9600"
[engine]
kind = "postgres"
[node.m1]
site = "master"
role = "primary"
[node.s1]
site = "snap"
role = "standby"
from = "m1"
[workload]
kind = "personnel"
persons = 200
[run]
rate = "30/min"
arrival = "regular"
users = 2
warmup = "2s"
duration = "6s"
cooldown = "1s"
`)
	if err != nil {
		t.Fatal(err)
	}
	if sum["provision"] != "fast" {
		t.Errorf("provision %v, want fast", sum["provision"])
	}
	// Built in seconds, not the hour and more the copy takes at 9.6 kbit/s.
	if s := num(t, sum, "setup_s"); s > 600 {
		t.Errorf("setup took %.0f s", s)
	}
	if lag := num(t, sum, "replicas", "s1", "lag_min_ms"); lag < 300 {
		t.Errorf("lag min %.0f ms at 9.6 kbit/s: the run was not measured across the serial line", lag)
	}
	if util := num(t, sum, "links", "master->snap", "rate_bps"); util != 9600 {
		t.Errorf("link rate %v in the measure phase, want 9600", util)
	}
}
