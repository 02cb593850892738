package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hcheck "replab/internal/check"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/history"
	"replab/internal/workload"
	"replab/internal/workload/listappend"
)

// The history on real servers (issue 31): PostgreSQL's REPEATABLE READ
// (snapshot isolation) under a workload made for write skew — transactions
// that read both of two keys and append to one — shows G2-item, with a
// witness, in about 8 % of transactions; its SERIALIZABLE shows nothing but,
// rarely, a G2-item too. That one is PostgreSQL's: Jepsen reported G2-item
// at SERIALIZABLE with this very workload (list-append by INSERT … ON
// CONFLICT DO UPDATE, reads by key) to pgsql-hackers ("Possible G2-item at
// SERIALIZABLE", PostgreSQL 18.4), and here it came once in about 12,000
// transactions in 2 of 16 suites (docs/consistency.md). So serializable may
// show G2-item at a rate a hundred times below repeatable read's, and
// nothing else.

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

// serializableG2Per: at SERIALIZABLE, at most one G2-item per this many
// transactions checked — 12 times the worst rate seen (1 in ~12,000), 100
// times below repeatable read's (~1 in 12) — and one whatever the count (a
// starved suite's run checked only 711, and had one).
const serializableG2Per = 1000

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
				g2 := res.Anomalies[hcheck.G2Item]
				others := 0
				for class, n := range res.Anomalies {
					if class != hcheck.G2Item {
						others += n
					}
				}
				w, _ := json.MarshalIndent(res.Witnesses, "", "  ")
				switch {
				case others > 0 || g2 > 1 && g2*serializableG2Per > res.TransactionsChecked:
					t.Errorf("serializable: anomalies %v in %d transactions; want none but G2-item, one or at most 1 per %d (PostgreSQL's reported one); witnesses:\n%s",
						res.Anomalies, res.TransactionsChecked, serializableG2Per, w)
				case g2 > 0:
					// The checker must still explain what it found.
					if ws := res.Witnesses[hcheck.G2Item]; len(ws) == 0 || len(ws[0].Edges) < 2 {
						t.Errorf("serializable: %d G2-item without a witness", g2)
					}
					t.Logf("serializable: %d G2-item in %d transactions — PostgreSQL's (see the comment above), not replab's; witnesses:\n%s", g2, res.TransactionsChecked, w)
				case res.StrongestSatisfied != hcheck.StrictSerializable:
					t.Errorf("serializable: no anomaly, yet the strongest model satisfied is %s; want strict-serializable", res.StrongestSatisfied)
				}
			} else {
				ws := res.Witnesses[tc.anomaly]
				if res.Anomalies[tc.anomaly] == 0 || len(ws) == 0 || len(ws[0].Edges) < 2 {
					t.Fatalf("no %s with a witness: anomalies %v", tc.anomaly, res.Anomalies)
				}
				// G2-item: a cycle with at least two anti-dependencies (one is
				// G-single); the others may be write-read or write-write.
				rw := 0
				for _, e := range ws[0].Edges {
					if e.Type == "rw" {
						rw++
					}
					if e.Why == "" {
						t.Errorf("an edge without its reason: %+v", e)
					}
				}
				if rw < 2 {
					t.Errorf("G2-item's witness has %d anti-dependency edges, want at least 2: %+v", rw, ws[0].Edges)
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

// readOps reads a history.jsonl.
func readOps(t *testing.T, path string) []history.Op {
	t.Helper()
	r, err := history.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ops []history.Op
	for {
		op, err := r.Next()
		if err == io.EOF {
			return ops
		}
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
}

// TestFakeHistoryOfAWorkloadWithoutMicroOperations: [run] history = true
// records kv-insert's transactions with their nodes, times and outcomes,
// and the summary says there was nothing to check rather than a verdict.
func TestFakeHistoryOfAWorkloadWithoutMicroOperations(t *testing.T) {
	sum, out, _, err := fakeRun(t, fakeSpec("", "history = true\n"))
	if err != nil {
		t.Fatal(err)
	}
	ops := readOps(t, filepath.Join(out, "history.jsonl"))
	c, _ := sum["consistency"].(map[string]any)
	if c == nil || !strings.Contains(fmt.Sprint(c["error"]), "records no micro-operations") || num(t, sum, "consistency", "operations") != float64(len(ops)) {
		t.Fatalf("consistency %v, %d operations in history.jsonl", c, len(ops))
	}
	if len(ops) == 0 || ops[0].Node != "p" || ops[0].TxnType != "insert" || ops[0].Type != history.OK {
		t.Errorf("first operation %+v", ops[0])
	}
}

// TestFakeHistoryOfRepetitions: list-append records by default; each
// repetition records and checks its own history, on keys no other
// repetition used and with transactions drawn anew, and the aggregate sums
// their counts. history = false
// records nothing.
func TestFakeHistoryOfRepetitions(t *testing.T) {
	spec := strings.Replace(fakeSpec("", "repetitions = 2\n"), `kind = "kv-insert"`, "kind = \"list-append\"\nkeys = 3", 1)
	spec = strings.Replace(spec, "users = 2", "users = 1", 1) // alone on the fake: nothing to find
	sum, out, _, err := fakeRun(t, spec)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[int64]string{}
	var checked float64
	shapes := map[string]string{} // by repetition: its first transactions' micro-operations, keys left out
	for _, rep := range []string{"rep-01", "rep-02"} {
		var shape strings.Builder
		for i, op := range readOps(t, filepath.Join(out, rep, "history.jsonl")) {
			if i < 40 {
				for _, m := range op.Value {
					shape.WriteString(m.Fn.String() + " ")
				}
				shape.WriteByte('|')
			}
			for _, m := range op.Value {
				if was, ok := keys[m.Key]; ok && was != rep {
					t.Fatalf("key %d in %s and %s", m.Key, was, rep)
				}
				keys[m.Key] = rep
			}
		}
		b, err := os.ReadFile(filepath.Join(out, rep, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rs map[string]any
		if err := json.Unmarshal(b, &rs); err != nil {
			t.Fatal(err)
		}
		shapes[rep] = shape.String()
		checked += num(t, rs, "consistency", "transactions_checked")
		if s := rs["consistency"].(map[string]any)["strongest_satisfied"]; s != hcheck.StrictSerializable {
			t.Errorf("%s: strongest %v", rep, s)
		}
		if _, err := os.Stat(filepath.Join(out, rep, "check.json")); err != nil {
			t.Error(err)
		}
	}
	// Each repetition draws transactions of its own (measureSeed): the
	// same draws would give the same reads and appends in the same order.
	if shapes["rep-01"] == shapes["rep-02"] {
		t.Errorf("the repetitions ran the same transactions: %s", shapes["rep-01"])
	}
	if got := num(t, sum, "consistency", "transactions_checked"); got != checked || checked == 0 {
		t.Errorf("aggregate: %v transactions checked, the repetitions %v", got, checked)
	}
	sum, out, _, err = fakeRun(t, strings.Replace(spec, "repetitions = 2", "history = false", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "history.jsonl")); err == nil || sum["consistency"] != nil {
		t.Errorf("history = false: history.jsonl %v, consistency %v", err, sum["consistency"])
	}
}
