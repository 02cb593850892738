package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/fake"
	"replab/internal/engine/mariadb"
	"replab/internal/engine/postgres"
	"replab/internal/engine/postgres/pgtest"
	"replab/internal/fault"
	"replab/internal/faultkind"
	"replab/internal/labtest"
	"replab/internal/report"
	"replab/internal/runner/runnertest"
	"replab/internal/spec"
	"replab/internal/testkit"
	"replab/internal/workload"
	"replab/internal/workload/kvinsert"
	"replab/internal/workload/personnel"
)

// TestFaultScheduleOnTheFake: a standby killed 1 s into the measure phase
// and started again 1 s later, then paused until the end: faults.csv logs
// each, the pause healed when the run ends, summary.json measures the run
// around them, and the run completes (the error cut-off is off).
func TestFaultScheduleOnTheFake(t *testing.T) {
	t.Parallel()
	text := strings.NewReplacer(`warmup = "400ms"`, `warmup = "500ms"`, `duration = "1s"`, `duration = "3s"`,
		`cooldown = "100ms"`, `cooldown = "500ms"`).Replace(fakeSpec("", ""))
	sum, out, log := runFaults(t, text, []spec.Fault{nodeFault(time.Second, time.Second, "s", "kill"),
		nodeFault(2500*time.Millisecond, 0, "s", "pause")},
		Options{Offline: true, Engines: engine.NewRegistry(fake.Engine{}), Workloads: workload.NewRegistry(kvinsert.Factory)})
	f, err := os.Open(filepath.Join(out, "faults.csv"))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := fault.ReadCSV(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ev {
		got = append(got, e.Action+" "+e.What)
	}
	want := []string{"apply node s kill", "heal node s kill", "apply node s pause", "heal node s pause (at the end of the run)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q\n%s", got, want, log)
	}
	if len(ev) == 4 && (ev[0].AtS < 1 || ev[1].AtS < 2 || ev[2].AtS < 2.5 || ev[3].AtS < 3 || ev[2].Err != "") {
		t.Errorf("times or errors: %+v", ev)
	}
	if len(sum.Faults) != 2 {
		t.Fatalf("summary faults: %+v", sum.Faults)
	}
	k := sum.Faults[0]
	if k.HealS == nil || k.Before.TPS <= 0 || k.Before.FromS != -0.5 || k.During.FromS != k.AtS {
		t.Errorf("kill: %+v", k)
	}
	runnertest.Verified(t, sum, "p", "s")
	// When it happened, as it happened: at 1 s, or later on a busy machine.
	if m := regexp.MustCompile(`fault at (\d+\.\d) s: apply node s kill`).FindStringSubmatch(log); m == nil || !atLeast(m[1], 1.0) {
		t.Errorf("the log does not say when the fault happened (at 1.0 s or later):\n%s", log)
	}
}

// nodeFault is a [[fault]] doing do to node at at, healed after dur (0:
// not healed by the schedule), as the spec reads it.
func nodeFault(at, dur time.Duration, node, do string) spec.Fault {
	sub := faultkind.Subject{On: faultkind.OnNode, Node: node}
	return spec.Fault{At: at, For: dur, Node: node, Kind: do, Act: &faultkind.Node{Subject: sub, Do: do}}
}

// linkDown is a [[fault]] cutting a<->b at at for dur.
func linkDown(at, dur time.Duration, a, b string) spec.Fault {
	sub := faultkind.Subject{On: faultkind.OnLink, From: a, To: b, Both: true}
	return spec.Fault{At: at, For: dur, Link: a + "<->" + b, From: a, To: b, Both: true, Kind: faultkind.SetName,
		Act: &faultkind.Set{Subject: sub, Changes: []string{"down"}}}
}

// runFaults runs spec text with faults through Run, opt giving the
// engines, the workloads and whether the lab is offline; it returns the
// summary, the results directory and the run's log.
func runFaults(t *testing.T, text string, faults []spec.Fault, opt Options) (*report.Summary, string, string) {
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
	s.Faults = faults
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var log bytes.Buffer
	opt.Out, opt.StateRoot, opt.DataRoot, opt.Log, opt.Version = filepath.Join(dir, "results"), t.TempDir(), t.TempDir(), &log, "test"
	sum, _, err := Run(ctx, s, opt)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	return sum, opt.Out, log.String()
}

// runWithFaults runs spec text (its [lab] name a %s) on PostgreSQL with
// the given faults.
func runWithFaults(t *testing.T, text string, faults []spec.Fault) (*report.Summary, string, string) {
	t.Helper()
	pgtest.Require(t)
	return runFaults(t, fmt.Sprintf(text, labtest.UniqueName("tflt")), faults,
		Options{Engines: engine.NewRegistry(postgres.Engine{}), Workloads: workload.NewRegistry(personnel.Factory)})
}

var syncPairSpec = testkit.ReadFile("testdata/sync-pair.toml")

// TestPartitionBlocksSyncCommitsUntilHealed: with a synchronous standby,
// cutting the link stops commits (they wait for the standby), and they
// resume once it heals; nothing fails.
func TestPartitionBlocksSyncCommitsUntilHealed(t *testing.T) {
	t.Parallel()
	// 8 s after the heal: the standby's connection resumes at its next
	// retransmission, whose back-off doubled during the partition, and a
	// loaded machine adds to it.
	text := strings.Replace(syncPairSpec, `duration = "6s"`, `duration = "12s"`, 1)
	if text == syncPairSpec {
		t.Fatal("syncPairSpec has no duration = \"6s\"")
	}
	sum, out, log := runWithFaults(t, text, []spec.Fault{linkDown(2*time.Second, 2*time.Second, "primary", "eu")})
	if len(sum.Faults) != 1 {
		t.Fatalf("faults %+v\n%s", sum.Faults, log)
	}
	f := sum.Faults[0]
	if f.Err != "" || f.HealS == nil {
		t.Fatalf("fault %+v", f)
	}
	defer func() {
		if t.Failed() {
			for _, n := range []string{"series.csv", "faults.csv", "lag.csv"} {
				b, _ := os.ReadFile(filepath.Join(out, n))
				t.Logf("%s:\n%s", n, b)
			}
			for _, f := range sum.Faults {
				t.Logf("%+v", f)
			}
		}
	}()
	if f.Before.TPS < 10 || f.During.TPS > f.Before.TPS/10 {
		t.Errorf("tps before %.1f during %.1f: a partition should stop synchronous commits", f.Before.TPS, f.During.TPS)
	}
	// Commits resume after the heal. (Whether they get back to 90 % of the
	// rate before, recover_s, is the machine's as much as the link's when
	// other tests load it: a suite run's came back to 57 of 88 a second.)
	if f.After.TPS <= 0 || f.After.TPS <= f.During.TPS {
		t.Errorf("no commits resumed after the heal: during %+v, after %+v\n%s", f.During, f.After, log)
	}
	if f.RecoverS == nil {
		t.Logf("throughput did not get back to 90 %% of the %.1f/s before the fault (after: %.1f/s)", f.Before.TPS, f.After.TPS)
	}
	if sum.Errors != 0 {
		t.Errorf("%d errors: synchronous commits should wait, not fail", sum.Errors)
	}
	runnertest.Verified(t, sum, "p1", "e1")
	if c := sum.Convergence; c == nil || !c.Converged || c.Nodes != 2 {
		t.Errorf("convergence %+v: the standby should hold what the primary holds", c)
	}
	// The commits caught by the partition waited for it: they end after
	// the heal, having taken about as long as it lasted.
	if f.After.MaxMs < 1500 {
		t.Errorf("the slowest commit after the heal took %.0f ms; the partition lasted 2 s", f.After.MaxMs)
	}
}

// TestStandbyKillAndRestart: kill -9 of an asynchronous standby does not
// stop the primary's commits; the changes made while it was down reach it
// after its start (the lag peaks at about the time it was down), and every
// tracked transaction becomes visible.
func TestStandbyKillAndRestart(t *testing.T) {
	t.Parallel()
	// Every commit tracked (lag_sample = 1), so that some committed in
	// the first second e1 was down, whatever the machine's rate.
	text := strings.NewReplacer(`replication = "sync"`, `replication = "async"`, "[run]\n", "[run]\nlag_sample = 1\n").Replace(syncPairSpec)
	sum, out, log := runWithFaults(t, text, []spec.Fault{nodeFault(2*time.Second, 2*time.Second, "e1", "kill")})
	f := sum.Faults[0]
	if f.Err != "" || f.HealS == nil {
		t.Fatalf("fault %+v\n%s", f, log)
	}
	// A synchronous primary stops: under a tenth of its rate (the
	// partition test above). How far below its rate an asynchronous one
	// goes depends on the machine: beside a CPU hog the standby's kill and
	// restart took 57 % of it (a clean-clone suite failed on "half").
	if f.Before.TPS < 10 || f.During.TPS < f.Before.TPS/10 {
		t.Errorf("tps before %.1f during %.1f: an async primary should not care about a dead standby", f.Before.TPS, f.During.TPS)
	}
	// A commit made in the first second e1 was down becomes visible there
	// only after its start, 2 s after the kill: its lag is over 1 s, on
	// any machine (load only delays the start and the catch-up). The
	// peak counts it however late e1 catches up: one suite run of ten
	// reported 43 ms when the peak stopped at the end of the cooldown
	// and e1 caught up only in the catch-up after it (fault.Measure).
	if peak := f.LagPeakMs["e1"]; peak < 1000 {
		b, _ := os.ReadFile(filepath.Join(out, "lag.csv"))
		t.Errorf("lag peak at e1 %.0f ms after 2 s down, want over 1000 (lag_peak_ms %v)\nlag.csv:\n%s\n%s", peak, f.LagPeakMs, b, log)
	}
	if sum.Replicas["e1"] == nil || sum.Replicas["e1"].NotVisibleAtEnd != 0 {
		t.Errorf("e1 did not catch up after its restart: %+v\n%s", sum.Replicas["e1"], log)
	}
	if _, err := os.Stat(filepath.Join(out, "faults.csv")); err != nil {
		t.Error(err)
	}
	runnertest.Verified(t, sum, "p1", "e1")
}

// TestKillOfANoSyncPrimaryIsVerified: with synchronous_commit off
// (durability = "nosync") a commit is acknowledged before its WAL is
// written, so kill -9 of the primary may lose the last few of each
// writer. Verification finds them, the same at the standby (which only
// ever had what the primary wrote), as a run of consecutive commits per
// writer (what crash recovery can lose: a tail), and never more than the
// primary committed in the second before the kill.
func TestKillOfANoSyncPrimaryIsVerified(t *testing.T) {
	t.Parallel()
	text := strings.NewReplacer(`replication = "sync"`, "replication = \"async\"\ndurability = \"nosync\"").Replace(syncPairSpec)
	sum, _, log := runWithFaults(t, text, []spec.Fault{nodeFault(2*time.Second, 2*time.Second, "p1", "kill")})
	v := sum.Verification
	if v == nil || v.Error != "" || v.Nodes["p1"] == nil || v.Nodes["e1"] == nil {
		t.Fatalf("verification %+v\n%s", v, log)
	}
	p, e := v.Nodes["p1"], v.Nodes["e1"]
	t.Logf("acknowledged %d, lost at p1 %d %v, at e1 %d", v.Acked, p.Lost, p.LostKeys, e.Lost)
	if p.Lost != e.Lost || strings.Join(p.LostKeys, " ") != strings.Join(e.LostKeys, " ") {
		t.Errorf("p1 lost %d %v, e1 %d %v: the standby can only lack what the primary lost", p.Lost, p.LostKeys, e.Lost, e.LostKeys)
	}
	if f := sum.Faults[0]; float64(p.Lost) > f.Before.TPS {
		t.Errorf("%d lost, more than the %.0f committed per second before the kill", p.Lost, f.Before.TPS)
	}
	last := map[string]int{}
	for _, k := range p.LostKeys {
		var w, s int
		if _, err := fmt.Sscanf(k, "%d/%d", &w, &s); err != nil {
			t.Fatalf("lost key %q", k)
		}
		ws := fmt.Sprint(w)
		if prev, ok := last[ws]; ok && s != prev+1 {
			t.Errorf("writer %d lost %d after %d: not a tail of consecutive commits", w, s, prev)
		}
		last[ws] = s
	}
}

// TestFailoverToThePromotedStandby: the primary of an asynchronous pair
// is killed, its standby promoted a second later; the users find the new
// primary (through the runner's targets), the run completes, the time
// without commits is measured, the old primary stays out (its start at the
// end is refused), and verification reads the new primary: what it lacks
// of the acknowledged commits is the recovery point, a tail of each
// writer's commits from just before the kill.
func TestFailoverToThePromotedStandby(t *testing.T) {
	t.Parallel()
	text := strings.Replace(syncPairSpec, `replication = "sync"`, `replication = "async"`, 1)
	sum, _, log := runWithFaults(t, text, []spec.Fault{
		nodeFault(2*time.Second, 0, "p1", "kill"),
		nodeFault(3*time.Second, 0, "e1", "promote")})
	if len(sum.Faults) != 2 || sum.Faults[0].Err != "" || sum.Faults[1].Err != "" {
		t.Fatalf("faults %+v\n%s", sum.Faults, log)
	}
	if sum.Faults[0].HealS != nil {
		t.Errorf("the killed primary was healed after its standby was promoted: %+v", sum.Faults[0])
	}
	kill := sum.Faults[0]
	if kill.UnavailableS < 1 || kill.After.TPS <= 0 {
		t.Errorf("kill: unavailable %.0f s, tps after %.1f: clients should be back on e1\n%s", kill.UnavailableS, kill.After.TPS, log)
	}
	if !strings.Contains(log, "heal node p1 kill (at the end of the run; not healed: stays down: node p1: failed over from") {
		t.Errorf("the old primary's start at the end was not refused:\n%s", log)
	}
	v := sum.Verification
	if v == nil || v.Nodes["e1"] == nil || v.Skipped["p1"] == "" {
		t.Fatalf("verification %+v\n%s", v, log)
	}
	e := v.Nodes["e1"]
	t.Logf("acknowledged %d, lost at e1 %d %v; unavailable %.0f s", v.Acked, e.Lost, e.LostKeys, kill.UnavailableS)
	last := map[int]int{}
	for _, k := range e.LostKeys {
		var w, s int
		if _, err := fmt.Sscanf(k, "%d/%d", &w, &s); err != nil {
			t.Fatalf("lost key %q", k)
		}
		if prev, ok := last[w]; ok && s != prev+1 {
			t.Errorf("writer %d lost %d after %d: not a tail", w, s, prev)
		}
		last[w] = s
	}
	if float64(e.Lost) > kill.Before.TPS {
		t.Errorf("%d lost: more than a second of commits (%.0f/s) behind a 10 ms link", e.Lost, kill.Before.TPS)
	}
	if c := sum.Convergence; c == nil || c.Converged || !strings.Contains(c.Error, "only 1 node") {
		t.Errorf("convergence %+v: one copy left, nothing to compare", c)
	}
}

const galeraTrioSpec = `
[lab]
name = "%s"
[site.a]
[site.b]
[site.c]
[[link]]
sites = ["a", "b"]
delay = "10ms"
[[link]]
sites = ["b", "c"]
delay = "10ms"
[[link]]
sites = ["a", "c"]
delay = "10ms"
[engine]
kind = "mariadb"
[node.g1]
site = "a"
role = "master"
[node.g2]
site = "b"
role = "master"
[node.g3]
site = "c"
role = "master"
[scheme]
replication = "galera"
gcache_size = "32M"
provider_options = "evs.keepalive_period=PT0.5S; evs.suspect_timeout=PT2S; evs.inactive_timeout=PT3S; evs.inactive_check_period=PT0.5S; evs.install_timeout=PT3S"
[workload]
kind = "personnel"
persons = 200
[run]
users = 3
warmup = "2s"
duration = "12s"
cooldown = "2s"
`

// TestGaleraPartitionConvergesWithNothingLost: synchronous multi-master
// under a partition — g3 cut off from both others for 5 s refuses writes
// (its users fail and reconnect) while g1 and g2 go on; after the heal g3
// rejoins, the copies converge and every acknowledged commit is at every
// member; updates of the same rows at several members lose certification
// (conflicts, counted, not lost).
func TestGaleraPartitionConvergesWithNothingLost(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.MariaDB, testkit.Galera)
	sum, _, log := runFaults(t, fmt.Sprintf(galeraTrioSpec, labtest.UniqueName("tgal")), []spec.Fault{
		linkDown(3*time.Second, 5*time.Second, "a", "c"),
		linkDown(3*time.Second, 5*time.Second, "b", "c")},
		Options{Engines: engine.NewRegistry(mariadb.Engine{}), Workloads: workload.NewRegistry(personnel.Factory)})
	if sum.Convergence == nil || !sum.Convergence.Converged {
		t.Errorf("convergence %+v\n%s", sum.Convergence, log)
	}
	runnertest.Verified(t, sum, "g1", "g2", "g3")
	if len(sum.Faults) != 2 || sum.Faults[0].During.TPS <= 0 {
		t.Errorf("the majority should go on writing during the partition: %+v", sum.Faults)
	}
	// g3's users are refused (1047) and move to the majority: a few
	// refusals each per change of view (cut off, then joining again after
	// the heal), not one per transaction while cut off, which at about 14
	// transactions a second per user would be some 200. (A clean-clone
	// suite run saw 16 once, where 4 per user was the bound.)
	var refused int64
	for _, tr := range sum.Types {
		refused += tr.Errors["1047"]
	}
	if refused > 10*int64(sum.Users) {
		t.Errorf("%d transactions refused with 1047 by 3 users: the users of the cut-off member should have moved to the others", refused)
	}
	rc := sum.ReplicationConflicts
	if rc == nil || rc.Error != "" || len(rc.Nodes) != 3 || sum.Conflicts > 0 && rc.Count == 0 {
		t.Errorf("replication conflicts %+v; the driver saw %d", rc, sum.Conflicts)
	}
	t.Logf("refused %d, conflicts %d (Galera counted %+v), errors %d, faults %+v", refused, sum.Conflicts, rc, sum.Errors, sum.Faults[0])
}

const pglogicalPairSpec = `
[lab]
name = "%s"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "10ms"
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
conflict = "last_update_wins"
[workload]
kind = "personnel"
persons = 50
[run]
users = 4
warmup = "2s"
duration = "10s"
cooldown = "1s"
`

// TestPglogicalPartitionConflictsAndConverges: two pglogical masters cut
// apart for 4 s both go on taking writes (asynchronous multi-master);
// users at both update the same 50 persons, so when the partition heals
// each master's apply workers find the other's changes in conflict and
// resolve them (the later commit wins): the conflicts are counted, the
// copies converge, and every acknowledged commit is at both masters.
func TestPglogicalPartitionConflictsAndConverges(t *testing.T) {
	sum, _, log := runWithFaults(t, pglogicalPairSpec, []spec.Fault{linkDown(3*time.Second, 4*time.Second, "a", "b")})
	rc := sum.ReplicationConflicts
	if rc == nil || rc.Error != "" || rc.Count == 0 || len(rc.Nodes) != 2 {
		t.Errorf("replication conflicts %+v: updates of 50 rows at both sides of a 4 s partition must conflict\n%s", rc, log)
	}
	if f := sum.Faults[0]; f.During.TPS <= 0 || f.UnavailableS > 1 {
		t.Errorf("both masters should go on taking writes during the partition: %+v", f)
	}
	if sum.Convergence == nil || !sum.Convergence.Converged {
		t.Errorf("convergence %+v\n%s", sum.Convergence, log)
	}
	runnertest.Verified(t, sum, "m1", "m2")
	t.Logf("conflicts %+v; driver conflicts %d, errors %d; fault %+v", rc, sum.Conflicts, sum.Errors, sum.Faults[0])
}

// atLeast says whether the number in s is at least min.
func atLeast(s string, min float64) bool {
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && v >= min
}
