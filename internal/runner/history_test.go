package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hcheck "replab/internal/check"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/workload"
	"replab/internal/workload/listappend"
)

// The history on real servers (issue 31): PostgreSQL's SERIALIZABLE under
// contention shows no anomaly, while its REPEATABLE READ (snapshot
// isolation) under a workload made for write skew — transactions that
// read both of two keys and append to one — shows G2-item, with a witness.

const historySpec = `
[lab]
name = "%%s"
[site.db]
[site.app]
[[link]]
sites = ["db", "app"]
delay = "1ms"
[engine]
kind = "postgres"
[node.p1]
site = "db"
role = "primary"
[scheme]
commit = "off"
[workload]
kind = "list-append"
keys = 2
ops_per_txn = [2, 3]
read_share = 0.67
appends_per_key = 64
isolation = %q
[run]
users = 8
client = "db"
warmup = "1s"
duration = "4s"
cooldown = "0s"
max_error_pct = 100   # contention on purpose: serialization failures are what isolation costs
`

func TestHistoryOnPostgres(t *testing.T) {
	pgtest.Require(t)
	for _, tc := range []struct {
		isolation string
		anomaly   string // "": none at all
	}{
		{"serializable", ""},
		{"repeatable read", hcheck.G2Item},
	} {
		t.Run(tc.isolation, func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var dataRoot string
			_, out, err := runSpecWith(t, ctx, fmt.Sprintf(historySpec, tc.isolation), &logWatch{}, func(o *Options) {
				o.Workloads = workload.NewRegistry(listappend.Factory)
				dataRoot = o.DataRoot
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: the run took %.1f s", tc.isolation, time.Since(start).Seconds())
			b, err := os.ReadFile(filepath.Join(out, "check.json"))
			if err != nil {
				t.Fatal(err)
			}
			var res hcheck.Result
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d checked (%d ok, %d fail, %d info): strongest %s, weakest violated %s, anomalies %v",
				res.TransactionsChecked, res.Operations.OK, res.Operations.Fail, res.Operations.Info, res.StrongestSatisfied, res.WeakestViolated, res.Anomalies)
			if res.TransactionsChecked < 100 || res.Operations.Fail == 0 || !res.Complete {
				t.Errorf("%d transactions checked, %d failed, complete %v: want contention (serialization failures) and a whole check",
					res.TransactionsChecked, res.Operations.Fail, res.Complete)
			}
			if tc.anomaly == "" {
				if !res.Valid() || res.StrongestSatisfied != hcheck.StrictSerializable {
					t.Errorf("serializable: anomalies %v, strongest %s; want none, strict-serializable", res.Anomalies, res.StrongestSatisfied)
				}
			} else {
				ws := res.Witnesses[tc.anomaly]
				if res.Anomalies[tc.anomaly] == 0 || len(ws) == 0 || len(ws[0].Edges) < 2 {
					t.Fatalf("no %s with a witness: anomalies %v", tc.anomaly, res.Anomalies)
				}
				for _, e := range ws[0].Edges {
					if e.Type != "rw" || e.Why == "" {
						t.Errorf("write skew's edges are anti-dependencies, each with its reason: %+v", e)
					}
				}
				t.Logf("witness: %s\n  %s", ws[0].Summary, strings.Join(ws[0].Lines(res.TimeOriginNs), "\n  "))
				if res.Violated("repeatable-read") != true || res.Violated("snapshot-isolation") {
					t.Errorf("violated %v: want repeatable-read among them, snapshot-isolation not", res.ModelsViolated)
				}
			}
			// Nothing left behind: no server of the run, no namespace.
			if ps, _ := exec.Command("ps", "-eo", "pid,args").Output(); strings.Contains(string(ps), dataRoot) {
				t.Errorf("a process of the run is still running:\n%s", grepLines(string(ps), dataRoot))
			}
			var resolved struct{ Lab struct{ Name string } }
			if b, err := os.ReadFile(filepath.Join(out, "resolved-spec.json")); err != nil || json.Unmarshal(b, &resolved) != nil || resolved.Lab.Name == "" {
				t.Fatalf("resolved-spec.json: %v", err)
			}
			if ns, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(ns), "replab-"+resolved.Lab.Name+".") {
				t.Errorf("namespaces of lab %s left:\n%s", resolved.Lab.Name, grepLines(string(ns), resolved.Lab.Name))
			}
		})
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
