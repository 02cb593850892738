package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/fake"
	"replab/internal/spec"
	"replab/internal/workload"
	"replab/internal/workload/kvinsert"
	"replab/internal/workload/listappend"
	"replab/internal/workload/personnel"
)

// The runner's orchestration against the fake engine, in this process:
// no root, namespaces or servers. The lab is offline (no links), so lags
// are the fake's replication delay.

// fakeRun runs spec text with the fake engine and returns summary.json as
// a generic map, the results directory and the run's log.
func fakeRun(t *testing.T, text string) (map[string]any, string, string, error) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "spec.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log bytes.Buffer
	out := filepath.Join(dir, "results")
	_, _, runErr := Run(ctx, s, Options{
		Out: out, StateRoot: t.TempDir(), DataRoot: t.TempDir(), Log: &log, Version: "test", Offline: true,
		Engines: engine.NewRegistry(fake.Engine{}), Workloads: workload.NewRegistry(personnel.Factory, kvinsert.Factory, listappend.Factory),
	})
	if testing.Verbose() {
		t.Logf("run log:\n%s", log.String())
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		if _, serr := os.Stat(filepath.Join(out, "sweep.json")); serr == nil {
			return nil, out, log.String(), runErr
		}
		t.Fatalf("summary.json missing (run error %v): %v\n%s", runErr, err, log.String())
	}
	var sum map[string]any
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	return sum, out, log.String(), runErr
}

// fakeSpec is a primary and a standby whose changes arrive after 5 ms,
// under kv-insert; extra lines go to [scheme] and [run].
func fakeSpec(scheme, run string) string {
	return `[lab]
name = "fk"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
[engine]
kind = "fake"
[node.p]
site = "a"
role = "primary"
[node.s]
site = "b"
role = "standby"
from = "p"
[scheme]
delay = "5ms"
` + scheme + `
[workload]
kind = "kv-insert"
[run]
users = 2
warmup = "400ms"
duration = "1s"
cooldown = "100ms"
lag_sample = 1
` + run
}

func TestFakeRunWritesTheSummaryContract(t *testing.T) {
	t.Parallel()
	sum, out, _, err := fakeRun(t, fakeSpec("", ""))
	if err != nil {
		t.Fatal(err)
	}
	if sum["complete"] != true || sum["engine"] != "fake" || sum["scheme"] != "default" || sum["workload"] != "kv-insert" {
		t.Fatalf("summary %v %v %v %v (%v)", sum["complete"], sum["engine"], sum["scheme"], sum["workload"], sum["stop_reason"])
	}
	tx := num(t, sum, "transactions")
	if tx == 0 || num(t, sum, "rows_changed") != tx || num(t, sum, "tpm") != tx*60 || num(t, sum, "errors") != 0 {
		t.Errorf("transactions %v, rows %v, tpm %v, errors %v", tx, num(t, sum, "rows_changed"), num(t, sum, "tpm"), num(t, sum, "errors"))
	}
	// Every measured transaction tracked (lag_sample = 1), each seen at
	// the standby no sooner than the fake's 5 ms.
	if tr := num(t, sum, "replicas", "s", "tracked"); tr != tx || num(t, sum, "replicas", "s", "lag_ms", "count") != tx {
		t.Errorf("tracked %v, lags %v, of %v transactions", tr, num(t, sum, "replicas", "s", "lag_ms", "count"), tx)
	}
	if p50 := num(t, sum, "replicas", "s", "lag_ms", "p50"); p50 < 5 || num(t, sum, "replicas", "s", "not_visible_at_end") != 0 {
		t.Errorf("lag p50 %.2f ms behind a 5 ms delay, %v not visible", p50, num(t, sum, "replicas", "s", "not_visible_at_end"))
	}
	// The engine's view: a backlog in transactions, and the applier's
	// thread as the standby's apply role.
	if u := sum["replication"].(map[string]any)["s"].(map[string]any)["backlog_unit"]; u != "transactions" {
		t.Errorf("backlog unit %v", u)
	}
	if role := sum["roles"].(map[string]any)["s"].(map[string]any)["apply"].(map[string]any); role["apply"] != true {
		t.Errorf("the standby's applier is not an apply role: %v", role)
	}
	// The machine as a whole, measured every second: machine_bound is
	// always there, and says what it was judged from.
	if _, ok := sum["machine_bound"].(bool); !ok {
		t.Errorf("machine_bound %v, want true or false", sum["machine_bound"])
	}
	if c, s := num(t, sum, "machine", "cores"), num(t, sum, "machine", "seconds"); c != float64(runtime.NumCPU()) || s < 0.9*num(t, sum, "measure_s") {
		t.Errorf("machine: %v cores over %v seconds of the %v s measured", c, s, num(t, sum, "measure_s"))
	}
	for _, f := range []string{"series.csv", "lag.csv", "latency.hlog", "environment.json", "resolved-spec.json", "spec.toml", "roles.csv", "replication.csv", "machine.csv"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("results file %s missing or empty", f)
		}
	}
}

// With [run] transactions the measure phase is the count, not the
// duration (an hour here): exactly that many transactions are measured,
// every one tracked, and the summary says how long they took.
func TestFakeTransactionsEndTheMeasurePhase(t *testing.T) {
	t.Parallel()
	text := strings.Replace(fakeSpec("", "transactions = 300\n"), `duration = "1s"`, `duration = "1h"`, 1)
	sum, _, log, err := fakeRun(t, text)
	if err != nil {
		t.Fatal(err)
	}
	tx := num(t, sum, "transactions")
	if sum["complete"] != true || tx != 300 || num(t, sum, "transactions_target") != 300 || num(t, sum, "transactions_done") != 300 {
		t.Fatalf("complete %v, %v transactions, done %v of %v; want 300", sum["complete"], tx, num(t, sum, "transactions_done"), num(t, sum, "transactions_target"))
	}
	ms := num(t, sum, "measure_s")
	if ms <= 0 || ms > 60 || math.Abs(num(t, sum, "tps")-tx/ms) > 1e-6*tx/ms {
		t.Errorf("measure phase %.3f s, tps %v; want the count's time and tps = transactions / it", ms, num(t, sum, "tps"))
	}
	if tr := num(t, sum, "replicas", "s", "tracked"); tr != 300 {
		t.Errorf("tracked %v of 300 measured transactions", tr)
	}
	if !strings.Contains(log, "measure phase: 300 transactions done after") {
		t.Errorf("the log does not say the count ended the measure phase:\n%s", log)
	}
}

func TestFakeConflictsAreRetriedAndCounted(t *testing.T) {
	t.Parallel()
	// Every 5th commit fails as a serialization conflict: the driver
	// retries it (the 6th succeeds), so nothing fails for good.
	sum, _, _, err := fakeRun(t, fakeSpec("conflict_every = 5", ""))
	if err != nil {
		t.Fatal(err)
	}
	tx, retries, conflicts := num(t, sum, "transactions"), num(t, sum, "retries"), num(t, sum, "conflicts")
	if num(t, sum, "errors") != 0 || retries == 0 || retries != conflicts {
		t.Errorf("errors %v, retries %v, conflicts %v", num(t, sum, "errors"), retries, conflicts)
	}
	// One in five of the attempts: conflicts / (transactions + conflicts)
	// is 1/5, give or take the phases' edges.
	if share := conflicts / (tx + conflicts); share < 0.15 || share > 0.25 {
		t.Errorf("conflicts %v of %v attempts (%.2f), want about 0.2", conflicts, tx+conflicts, share)
	}
	if c := num(t, sum, "types", "insert", "conflicts"); c != conflicts {
		t.Errorf("type insert counts %v conflicts, the run %v", c, conflicts)
	}
}

func TestFakeTooManyErrorsStopTheRun(t *testing.T) {
	t.Parallel()
	// Every 2nd commit fails for good: half the attempts, more than the
	// 20 % cut-off.
	sum, _, _, err := fakeRun(t, fakeSpec("fail_every = 2", "max_error_pct = 20\n"))
	if err == nil || sum["complete"] != false || !strings.Contains(fmt.Sprint(sum["stop_reason"]), "failed") {
		t.Fatalf("error %v, complete %v, reason %v: want stopped by the error cut-off", err, sum["complete"], sum["stop_reason"])
	}
	if errs := sum["types"].(map[string]any)["insert"].(map[string]any)["errors"].(map[string]any); errs["XX000"] == nil {
		t.Errorf("errors by code %v, want XX000 (the injected failure)", errs)
	}
}

func TestFakeRepetitionsAggregate(t *testing.T) {
	t.Parallel()
	sum, out, _, err := fakeRun(t, fakeSpec("", "repetitions = 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sum["kind"] != "repetitions" || sum["complete"] != true || num(t, sum, "tpm_ci", "n") != 3 {
		t.Fatalf("kind %v complete %v tpm_ci %v", sum["kind"], sum["complete"], sum["tpm_ci"])
	}
	var total float64
	for i := 1; i <= 3; i++ {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rep-%02d", i), "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep map[string]any
		_ = json.Unmarshal(b, &rep)
		// Each repetition restarts the writers' sequences: every one of
		// its transactions is seen at the standby again.
		if rep["complete"] != true || num(t, rep, "replicas", "s", "tracked") != num(t, rep, "transactions") {
			t.Errorf("repetition %d: complete %v, tracked %v of %v", i, rep["complete"], num(t, rep, "replicas", "s", "tracked"), num(t, rep, "transactions"))
		}
		total += num(t, rep, "tpm")
	}
	if d := total/3 - num(t, sum, "tpm"); d > 1e-6 || d < -1e-6 {
		t.Errorf("tpm %v is not the mean of the repetitions %v", num(t, sum, "tpm"), total/3)
	}
}

func TestFakeSweepRunsEveryPoint(t *testing.T) {
	t.Parallel()
	_, out, log, err := fakeRun(t, fakeSpec("", "")+"\n[sweep]\n\"scheme.delay\" = [\"2ms\", \"20ms\"]\n")
	if err != nil {
		t.Fatal(err)
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
		t.Fatalf("sweep complete %v, %d points", sw.Complete, len(sw.Points))
	}
	// The engine's own option, swept: the lag follows the delay. No lag
	// is below its point's delay, and some lag at the 2 ms point is below
	// 20 ms, which that point run with the other's delay could not show.
	// (How far above the delay the lags are depends on how busy the
	// machine is: beside a CPU hog the 2 ms point's median reached 36 ms.)
	for i, want := range []float64{2, 20} {
		if lag := num(t, sw.Points[i].Summary, "lag_p50_ms", "s"); lag < want {
			t.Errorf("%s: lag p50 %.2f ms, below the delay", sw.Points[i].Label, lag)
		}
		b, err := os.ReadFile(filepath.Join(out, sw.Points[i].Dir, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		var pt map[string]any
		if err := json.Unmarshal(b, &pt); err != nil {
			t.Fatal(err)
		}
		minLag := num(t, pt, "replicas", "s", "lag_min_ms")
		if minLag < want || (want == 2 && minLag >= 20) {
			t.Errorf("%s: fastest lag %.2f ms, want ≥ %.0f (and < 20 at 2 ms)", sw.Points[i].Label, minLag, want)
		}
	}
	if !strings.Contains(log, "scheme.delay") {
		t.Errorf("no sweep table in the output:\n%s", log)
	}
}

func TestFakeReadsAtAReplicaCarryNoStamp(t *testing.T) {
	t.Parallel()
	text := strings.Replace(fakeSpec("", ""), "kind = \"kv-insert\"", "kind = \"personnel\"\npersons = 50\nread_pct = 50\nreads_at = \"replica\"", 1)
	sum, _, _, err := fakeRun(t, text)
	if err != nil {
		t.Fatal(err)
	}
	updates, lookups := num(t, sum, "types", "update", "count"), num(t, sum, "types", "lookup", "count")
	if updates == 0 || lookups == 0 || num(t, sum, "errors") != 0 {
		t.Fatalf("updates %v, lookups %v, errors %v", updates, lookups, num(t, sum, "errors"))
	}
	// Only the writing type is tracked: a lookup at the standby has no
	// stamp (and could not write one there).
	if tr := num(t, sum, "replicas", "s", "tracked"); tr != updates {
		t.Errorf("tracked %v, want the %v updates only", tr, updates)
	}
}

func TestFakeMultiMasterLagSkipsEachMastersOwnUsers(t *testing.T) {
	t.Parallel()
	text := strings.NewReplacer("role = \"primary\"", "role = \"master\"", "role = \"standby\"\nfrom = \"p\"", "role = \"master\"",
		"[scheme]\n", "[scheme]\nreplication = \"multimaster\"\n").Replace(fakeSpec("", ""))
	sum, _, _, err := fakeRun(t, text)
	if err != nil {
		t.Fatal(err)
	}
	tp, ts, tx := num(t, sum, "replicas", "p", "tracked"), num(t, sum, "replicas", "s", "tracked"), num(t, sum, "transactions")
	if tp <= 0 || ts <= 0 || tp+ts != tx {
		t.Errorf("tracked at p %v, at s %v, of %v: each master tracks the other's user only", tp, ts, tx)
	}
	for _, m := range []string{"p", "s"} {
		if p50 := num(t, sum, "replicas", m, "lag_ms", "p50"); p50 < 5 {
			t.Errorf("%s: lag p50 %.2f ms, below the 5 ms delay: its own users' commits were counted", m, p50)
		}
	}
}

func TestFakeBadSpecErrorsComeAllAtOnce(t *testing.T) {
	// An engine option and a workload option, both wrong: one run, both
	// errors, each at its line.
	text := strings.Replace(fakeSpec("delay = \"soon\"", ""), "kind = \"kv-insert\"", "kind = \"kv-insert\"\nkey_bytes = 2", 1)
	text = strings.Replace(text, "delay = \"5ms\"\n", "", 1)
	path := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Run(context.Background(), s, Options{Offline: true, Engines: engine.NewRegistry(fake.Engine{}), Workloads: workload.NewRegistry(kvinsert.Factory)})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"bad.toml:17: scheme.delay", "bad.toml:20: workload.key_bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%v", want, err)
		}
	}
}

// Two masters updating the same few rows cross each other's updates: the
// fake, like MariaDB's two-way replication, applies row images without
// resolving conflicts, so the copies end different. The run says so; a
// primary and its standby under the same load end the same.
func TestFakeConvergenceIsCheckedAndDivergenceReported(t *testing.T) {
	t.Parallel()
	personnel := func(text string) string {
		return strings.Replace(text, "kind = \"kv-insert\"", "kind = \"personnel\"\npersons = 4", 1)
	}
	// The copies end apart when a row's last updates at the two masters
	// came within the replication delay of each other: 200 ms and two rows
	// make that near certain even on a loaded machine (with 5 ms and four a
	// clean-clone suite once saw them converge).
	mm := strings.NewReplacer("role = \"primary\"", "role = \"master\"", "role = \"standby\"\nfrom = \"p\"", "role = \"master\"",
		"[scheme]\n", "[scheme]\nreplication = \"multimaster\"\n", "delay = \"5ms\"", "delay = \"200ms\"",
		"persons = 4", "persons = 2").Replace(personnel(fakeSpec("", "")))
	cases := []struct {
		name, text string
		converged  bool
	}{
		{"primary and standby", personnel(fakeSpec("", "")), true},
		{"two masters, crossing updates", mm, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sum, _, log, err := fakeRun(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			conv, ok := sum["convergence"].(map[string]any)
			if !ok {
				t.Fatalf("no convergence in the summary: %v", sum["convergence"])
			}
			if conv["converged"] != tc.converged || conv["nodes"] != 2.0 || conv["tables"] == 0.0 || conv["error"] != nil {
				t.Fatalf("convergence %v, want converged = %v at 2 nodes", conv, tc.converged)
			}
			diverged, _ := conv["diverged"].(map[string]any)
			if tc.converged != (len(diverged) == 0) || conv["diverged_tables"] != float64(len(diverged)) {
				t.Errorf("diverged %v (%v tables)", diverged, conv["diverged_tables"])
			}
			if d, ok := diverged["per"].(string); !tc.converged && (!ok || !strings.Contains(d, "p ") || !strings.Contains(d, "s ")) {
				t.Errorf("the per table's entry %q should give both nodes' sums", d)
			}
			if !tc.converged && !strings.Contains(log, "the copies diverged") {
				t.Errorf("the run log does not warn:\n%s", log)
			}
		})
	}
}
