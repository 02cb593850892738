package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/labtest"
	"replab/internal/monitor"
	"replab/internal/report"
	"replab/internal/spec"
	"replab/internal/stats"
	"replab/internal/testkit"
	"replab/internal/workload"
	"replab/internal/workload/personnel"
)

func stepSum(tps, p99 float64, tx, errs int64) *report.Summary {
	return &report.Summary{Complete: true, TPS: tps, TPM: 60 * tps, Transactions: tx, Errors: errs, CommitLatency: stats.Percentiles{P99: p99}}
}

// TestJudgeSteps applies the exhaustion rule step by step.
func TestJudgeSteps(t *testing.T) {
	rule := func() *report.Search {
		return &report.Search{By: "users", MinEfficiency: 0.5, MaxErrorPct: 1, MaxP99Ms: 100}
	}
	type step struct {
		load float64
		sum  *report.Summary
		err  error
	}
	for _, tc := range []struct {
		name           string
		steps          []step
		knee, exhaust  int
		why            string
		lastEfficiency float64
	}{
		{"linear, then flat", []step{{1, stepSum(100, 5, 1000, 0), nil}, {4, stepSum(390, 6, 3900, 0), nil}, {16, stepSum(520, 20, 5200, 0), nil}},
			2, 3, "throughput stopped rising: 520.0 tps after 390.0, 11 % of the load's rise of 300 % (less than 50 %)", 0.111},
		{"errors", []step{{1, stepSum(100, 5, 1000, 0), nil}, {2, stepSum(200, 5, 1970, 30), nil}},
			1, 2, "errors appeared: 1.50 % of transactions failed", 1},
		{"within 1 % of errors", []step{{1, stepSum(100, 5, 1000, 0), nil}, {2, stepSum(200, 5, 1990, 10), nil}}, 2, 0, "", 1},
		{"latency bound", []step{{1, stepSum(100, 5, 1000, 0), nil}, {2, stepSum(200, 150, 2000, 0), nil}},
			1, 2, "commit latency p99 150.0 ms passed the bound of 100 ms", 1},
		{"incomplete first step", []step{{1, &report.Summary{StopReason: "too many errors"}, errors.New("too many errors")}},
			0, 1, "the run did not complete: too many errors", 0},
		{"throughput fell", []step{{10, stepSum(100, 5, 1000, 0), nil}, {20, stepSum(80, 5, 800, 0), nil}},
			1, 2, "throughput stopped rising: 80.0 tps after 100.0, -20 % of the load's rise of 100 %", -0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := rule()
			for _, st := range tc.steps {
				var prev *report.SearchStep
				if n := len(sr.Steps); n > 0 {
					prev = &sr.Steps[n-1]
				}
				js := judgeStep(sr, prev, st.load, "step", st.sum, st.err)
				sr.Steps = append(sr.Steps, js)
				if !js.Scales {
					break
				}
			}
			concludeSearch(sr, len(tc.steps))
			if sr.KneeStep != tc.knee || sr.ExhaustStep != tc.exhaust || !strings.HasPrefix(sr.Why, tc.why) {
				t.Errorf("knee %d, exhaust %d, why %q; want %d, %d, %q", sr.KneeStep, sr.ExhaustStep, sr.Why, tc.knee, tc.exhaust, tc.why)
			}
			last := sr.Steps[len(sr.Steps)-1]
			if len(sr.Steps) > 1 && (last.Efficiency == nil || *last.Efficiency != tc.lastEfficiency) {
				t.Errorf("efficiency %v, want %v", last.Efficiency, tc.lastEfficiency)
			}
			if !sr.Complete {
				t.Errorf("incomplete")
			}
		})
	}
}

// TestResources: the busiest first, each against its own limit.
func TestResources(t *testing.T) {
	s := &spec.Spec{Sites: []spec.Site{{Name: "db", CPUCores: 0.5}, {Name: "eu"}},
		Nodes: []spec.Node{{Name: "p1", Site: "db"}, {Name: "e1", Site: "eu"}},
		Run:   spec.Run{Duration: 10 * time.Second}}
	util := 40.0
	sum := &report.Summary{IOWaitMeasured: true,
		Roles: map[string]map[string]monitor.RoleSummary{
			"p1": {"backend": {CPUCores: 0.4, IOWaitS: 2}, "walwriter": {CPUCores: 0.05}},
			"e1": {"startup": {CPUCores: 0.1}}, "e1/storage": {"sshfs": {CPUCores: 0.05}}},
		Links: map[string]monitor.LinkSummary{"db->eu": {UtilizationAvgPct: &util, RateBps: 10e6}, "eu->db": {}}}
	got := resources(sum, s, 0.6, 2, map[string]float64{"db": 0.3})
	var what []string
	for _, r := range got {
		what = append(what, r.What)
	}
	want := "cpu at site db|the machine's cpu|link db->eu|io wait at node p1|cpu at site eu|io wait at node e1|io wait at node e1/storage"
	if strings.Join(what, "|") != want {
		t.Fatalf("order %q, want %q", strings.Join(what, "|"), want)
	}
	if got[0].Used != 0.9 || got[0].Detail != "0.45 cores of its limit of 0.5, held back by it in 30 % of periods" {
		t.Errorf("site db: %+v", got[0])
	}
	if got[1].Used != 0.6 || !strings.Contains(got[1].Detail, "servers 0.60, replab (driver, links, monitors) 0.60") {
		t.Errorf("machine: %+v", got[1])
	}
	if got[2].Used != 0.4 || got[2].Detail != "40 % of 10 Mbit/s on average" {
		t.Errorf("link: %+v", got[2])
	}
	if got[4].Detail != "0.15 cores of the machine's 2" {
		t.Errorf("site eu, with e1's storage processes: %+v", got[4])
	}
	sr := &report.Search{Steps: []report.SearchStep{{Scales: true}, {Why: "flat", Resources: got}}}
	concludeSearch(sr, 5)
	if sr.Resource != "cpu at site db: 0.45 cores of its limit of 0.5, held back by it in 30 % of periods" {
		t.Errorf("resource %q", sr.Resource)
	}
	sr.Steps[1].Resources = got[1:]
	concludeSearch(sr, 5)
	if !strings.HasPrefix(sr.Resource, "none near its limit; the busiest: the machine's cpu") {
		t.Errorf("resource %q", sr.Resource)
	}

	// Measured, the machine counts every process of it; a step it bound
	// ran out of it, whatever its mean.
	sum.Machine = &monitor.MachineSummary{Cores: 2, Seconds: 10, BusySeconds: 3, BusyMeanPct: 70, ServerCores: 0.6, ReplabCores: 0.6, OtherCores: 0.2, Bound: true}
	got = resources(sum, s, 0.6, 2, map[string]float64{"db": 0.3})
	i := slices.IndexFunc(got, func(r report.Resource) bool { return r.What == "the machine's cpu" })
	if i < 0 || got[i].Used != resourceFull ||
		got[i].Detail != "70 % of 2 cores busy, every core for 3 of 10 s: servers 0.60, replab (driver, links, monitors) 0.60, other work 0.20" {
		t.Errorf("a machine-bound step: %+v", got)
	}
}

const cpuLimitedSpec = `
[lab]
name = "%s"
[site.app]
[site.db]
cpu = 0.1
[[link]]
sites = ["app", "db"]
delay = "1ms"
[engine]
kind = "postgres"
[node.p1]
site = "db"
role = "primary"
[scheme]
durability = "nosync"
[workload]
kind = "personnel"
persons = 200
[run]
client = "app"
think = "10ms"
warmup = "1s"
duration = "3s"
cooldown = "0s"
search = "users"
search_steps = [1, 4, 16, 64]
`

// TestSearchFindsTheKneeOfACPULimit: the database's site may use a tenth
// of a core; users that think 10 ms between transactions scale until the
// server's CPU runs out, a few users in. The search must stop at a step
// that no longer scales, name the site's CPU as what ran out, and leave
// each step's results and search.json behind.
func TestSearchFindsTheKneeOfACPULimit(t *testing.T) {
	t.Parallel()
	testkit.Exclusive(t) // a site's CPU limit must be the busiest resource, not the machine
	pgtest.Require(t)
	sum, out, log := runFaults(t, fmt.Sprintf(cpuLimitedSpec, labtest.UniqueName("tsrch")), nil,
		Options{Engines: engine.NewRegistry(postgres.Engine{}), Workloads: workload.NewRegistry(personnel.Factory)})
	sr := sum.Search
	if sr == nil {
		t.Fatalf("no search in the summary\n%s", log)
	}
	var b strings.Builder
	report.PrintSearch(&b, sr)
	t.Logf("\n%s", b.String())
	if sr.ExhaustStep == 0 || sr.KneeStep != sr.ExhaustStep-1 || sr.KneeStep == 0 {
		t.Fatalf("knee %d, exhaust %d: the CPU limit should exhaust a step after the first\n%s", sr.KneeStep, sr.ExhaustStep, log)
	}
	if !strings.HasPrefix(sr.Resource, "cpu at site db") {
		t.Errorf("ran out: %q, want the db site's CPU", sr.Resource)
	}
	if sum.Users != int(sr.Steps[sr.KneeStep-1].Load) {
		t.Errorf("the summary is of %d users, the knee is at %g", sum.Users, sr.Steps[sr.KneeStep-1].Load)
	}
	for _, st := range sr.Steps {
		if _, err := os.Stat(filepath.Join(out, st.Dir, "summary.json")); err != nil {
			t.Errorf("step %s: %v", st.Dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "search.json")); err != nil {
		t.Error(err)
	}
}
