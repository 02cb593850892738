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

	"replab/internal/engine/postgres/pgtest"
	"replab/internal/report"
	"replab/internal/workload"
	"replab/internal/workload/listappend"
)

// TestFakeStaleReadsAtAReplica: list-append with half its reads at a
// standby whose changes arrive 5 ms after their commit, one user (the
// fake applies concurrent appends to a key as lost updates, which a read
// at the primary would then miss too). Some reads there miss a
// write acknowledged before they began; none at the primary does; no
// stale read is staler than the longest lag; the prediction from the same
// run's lag is there beside the measure, and stale_reads.csv lists each
// stale read.
func TestFakeStaleReadsAtAReplica(t *testing.T) {
	t.Parallel()
	text := strings.Replace(fakeSpec("", ""), "kind = \"kv-insert\"",
		"kind = \"list-append\"\nkeys = 4\nops_per_txn = [1, 2]\nread_share = 0.6\nreads_at = \"any\"", 1)
	text = strings.Replace(text, "users = 2", "users = 1", 1)
	_, out, log, err := fakeRun(t, text)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sum report.Summary
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	st := sum.StaleReads
	if st == nil || st.Error != "" {
		t.Fatalf("stale_reads %+v", st)
	}
	s, p := st.Nodes["s"], st.Nodes["p"]
	if s == nil || p == nil || st.Roles["s"] != "replica" || st.Roles["p"] != "source" {
		t.Fatalf("nodes %v, roles %v: want the standby s and the primary p", st.Nodes, st.Roles)
	}
	if p.Stale != 0 || p.Predicted != nil {
		t.Errorf("the primary: %d stale reads, prediction %+v; want none", p.Stale, p.Predicted)
	}
	if s.Reads < 50 || s.Stale == 0 || s.Predicted == nil || s.Predicted.LagSamples == 0 {
		t.Fatalf("the standby: %d reads, %d stale, prediction %+v", s.Reads, s.Stale, s.Predicted)
	}
	lagMax := sum.Replicas["s"].LagMs.Max
	if s.StalenessMs.Max >= lagMax {
		t.Errorf("a read %.3f ms after the write it missed was acknowledged, the longest lag %.3f ms: a read cannot miss a write that long visible", s.StalenessMs.Max, lagMax)
	}
	if s.Predicted.Share <= 0 || s.Predicted.ShareFromAck < s.Predicted.Share {
		t.Errorf("predicted %+v", s.Predicted)
	}
	t.Logf("standby: %d reads, %d stale (%.4f), predicted %.4f (from the ack %.4f), RYW %.1f/10k, MR %.1f/10k, staleness %+v",
		s.Reads, s.Stale, s.StaleShare, s.Predicted.Share, s.Predicted.ShareFromAck, s.RYWPer10k, s.MonotonicPer10k, s.StalenessMs)
	csv, err := os.ReadFile(filepath.Join(out, report.StaleReadsFile))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(csv), "\n") - 1; int64(lines) != s.Stale {
		t.Errorf("%s lists %d stale reads, the summary counts %d", report.StaleReadsFile, lines, s.Stale)
	}
	if os.Getenv("KEEP") != "" {
		t.Logf("results in %s", out)
		_ = os.Rename(out, os.Getenv("KEEP"))
	}
}

// TestFakeReadDelayPassesTheLag: reads of the keys a user just wrote, at
// a standby 5 ms behind: without a pause many miss the write; held 30 ms
// after it, none does — unless a lag passed 30 ms (a busy machine can hold
// the fake's applier back), and then only by less than that lag.
func TestFakeReadDelayPassesTheLag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		delay string
		stale bool
	}{{"0s", true}, {"30ms", false}} {
		t.Run("read_delay "+c.delay, func(t *testing.T) {
			t.Parallel()
			text := strings.Replace(fakeSpec("", ""), "kind = \"kv-insert\"",
				"kind = \"list-append\"\nkeys = 20\nops_per_txn = [1, 2]\nread_share = 0.6\nreads_at = \"replica\"\nread_keys = \"own\"\nread_delay = \""+c.delay+"\"", 1)
			text = strings.Replace(text, "users = 2", "users = 1", 1)
			_, out, log, err := fakeRun(t, text)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			var sum report.Summary
			b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
			if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatal(err)
			}
			s := sum.StaleReads.Nodes["s"]
			if s == nil || s.OwnReads < 10 {
				t.Fatalf("standby: %+v", s)
			}
			lagMax := sum.Replicas["s"].LagMs.Max
			if late := !c.stale && s.Stale > 0 && lagMax > 30; late {
				t.Logf("%d stale reads after a 30 ms pause: the longest lag was %.1f ms", s.Stale, lagMax)
			} else if (s.Stale > 0) != c.stale {
				t.Errorf("%d stale of %d reads (%d of the user's own writes, lag max %.1f ms); want stale reads: %v", s.Stale, s.Reads, s.OwnReads, sum.Replicas["s"].LagMs.Max, c.stale)
			}
			if s.OwnReads != s.Reads {
				t.Errorf("read_keys = \"own\": %d of %d reads of the user's own last write", s.OwnReads, s.Reads)
			}
		})
	}
}

// The readers' question on real servers (issue 32): a PostgreSQL primary
// and a standby 40 ms away (each way), users beside the standby writing
// at the primary and reading their own last write at the standby. Without
// a wait some reads miss it; waiting for the write's LSN at the standby
// none does. Asserted whatever the load: no stale read at the primary,
// no stale read staler than the longest lag measured, a prediction from
// the same run's lag, and with the wait no read-your-writes violation.
const staleSpec = `
[lab]
name = "%%s"
[site.london]
[site.frankfurt]
[[link]]
sites = ["london", "frankfurt"]
delay = "40ms"
rate = "1gbit"
[engine]
kind = "postgres"
[node.p1]
site = "london"
role = "primary"
[node.s1]
site = "frankfurt"
role = "standby"
from = "p1"
[workload]
kind = "list-append"
keys = 32
ops_per_txn = [1, 2]
read_share = 0.6
isolation = "repeatable read"
reads_at = "replica"
read_keys = "own"
read_wait = %q
[run]
users = 12
client = "frankfurt"
lag_sample = 1
warmup = "2s"
duration = "8s"
cooldown = "1s"
`

func TestStaleReadsOnPostgres(t *testing.T) {
	t.Parallel()
	pgtest.Require(t)
	for _, wait := range []string{"none", "own-writes"} {
		t.Run("read_wait "+wait, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var dataRoot string
			_, out, err := runSpecWith(t, ctx, fmt.Sprintf(staleSpec, wait), &logWatch{}, func(o *Options) {
				o.Workloads = workload.NewRegistry(listappend.Factory)
				dataRoot = o.DataRoot
			})
			if err != nil {
				t.Fatal(err)
			}
			var sum report.Summary
			b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
			if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatal(err)
			}
			st := sum.StaleReads
			if st == nil || st.Nodes["s1"] == nil {
				t.Fatalf("stale_reads %+v", st)
			}
			s, p := st.Nodes["s1"], st.Nodes["p1"]
			if p != nil && p.Stale > 0 {
				t.Errorf("%d stale reads at the primary", p.Stale)
			}
			pr := s.Predicted
			if s.Reads < 100 || s.OwnReads < 100 || pr == nil || pr.LagSamples < 50 {
				t.Fatalf("the standby: %d reads (%d of the user's own write), prediction %+v", s.Reads, s.OwnReads, pr)
			}
			lag := sum.Replicas["s1"].LagMs
			t.Logf("%s: %d reads, %d stale (%.4f), RYW %d; predicted %.4f [%.4f, %.4f], from the ack %.4f, agree %v; staleness %+v; lag p50 %.1f max %.1f ms",
				wait, s.Reads, s.Stale, s.StaleShare, s.RYWViolations, pr.Share, pr.ShareLow, pr.ShareHigh, pr.ShareFromAck, pr.Agree, s.StalenessMs, lag.P50, lag.Max)
			// A read cannot miss a write for longer than writes took to
			// arrive (the longest lag, from its COMMIT sent, which is
			// before its acknowledgement), give or take the lag's
			// resolution.
			if s.Stale > 0 && s.StalenessMs.P99 > lag.Max+pr.LagSlackMs {
				t.Errorf("staleness p99 %.1f ms, the longest lag %.1f ms: reads missed writes longer visible than any lag", s.StalenessMs.P99, lag.Max)
			}
			if pr.ShareLow > pr.Share || pr.Share > pr.ShareHigh || pr.ShareFromAck < pr.ShareHigh {
				t.Errorf("prediction %+v: want low ≤ share ≤ high ≤ from the ack", pr)
			}
			switch wait {
			case "none":
				if s.Stale == 0 || s.RYWViolations == 0 {
					t.Errorf("reading their own writes 40 ms from the primary, %d of %d reads stale and %d missing the user's own write: want some", s.Stale, s.Reads, s.RYWViolations)
				}
			case "own-writes":
				if s.RYWViolations != 0 {
					t.Errorf("waiting for each write's LSN at the standby, %d reads still missed the user's own write", s.RYWViolations)
				}
			}
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

// TestFakePersonnelRecordsItsDescriptions: personnel with its lookups at
// the standby and history = true records each update as a write of the
// person's register and each lookup as a read, so that its stale reads
// are counted too.
func TestFakePersonnelRecordsItsDescriptions(t *testing.T) {
	t.Parallel()
	text := strings.Replace(fakeSpec("", "history = true\n"), "kind = \"kv-insert\"", "kind = \"personnel\"\npersons = 20\nread_pct = 60\nreads_at = \"replica\"", 1)
	_, out, log, err := fakeRun(t, text)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var sum report.Summary
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	c := sum.Consistency
	if c == nil || c.Error != "" || c.TransactionsChecked == 0 {
		t.Fatalf("consistency %+v", c)
	}
	if st := sum.StaleReads; st == nil || st.Nodes["s"] == nil || st.Nodes["s"].Reads == 0 || st.Nodes["s"].Stale == 0 {
		t.Errorf("stale reads %+v: want the standby's lookups counted, some stale", st)
	}
	for _, class := range []string{"garbage-read", "G1a", "internal"} {
		if c.Anomalies[class] > 0 {
			t.Errorf("%d %s: the recorded values do not explain the reads", c.Anomalies[class], class)
		}
	}
}
