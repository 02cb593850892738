package postgres

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"replab/internal/engine"
)

func TestSyncNamesAfterFailover(t *testing.T) {
	cases := []struct {
		name, old string
		follow    []string
		want      string
	}{
		{"the promoted node drops out of a quorum", "ANY 1 (e1, a1)", []string{"a1"}, "ANY 1 (a1)"},
		{"priority order kept", "FIRST 1 (e1, a1, a2)", []string{"a1", "a2"}, "FIRST 1 (a1, a2)"},
		{"the count shrinks to the names left", "FIRST 2 (e1, a1)", []string{"a1"}, "FIRST 1 (a1)"},
		{"a quorum of two of three left", "ANY 2 (e1, a1, a2)", []string{"a1", "a2"}, "ANY 2 (a1, a2)"},
		{"the only synchronous standby promoted: none", "FIRST 1 (e1)", []string{"a1"}, ""},
		{"an unlisted standby stays asynchronous", "ANY 1 (e1, a1)", []string{"a1", "a2"}, "ANY 1 (a1)"},
		{"async: none", "", []string{"a1"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := syncNamesAfter(tc.old, tc.follow); got != tc.want {
				t.Errorf("syncNamesAfter(%q, %v) = %q, want %q", tc.old, tc.follow, got, tc.want)
			}
		})
	}
}

// TestPausedSeesAStoppedProcess: a standby paused (SIGSTOP) at the
// promotion is re-pointed in its configuration only, not waited for.
func TestPausedSeesAStoppedProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if paused(pid) {
		t.Fatal("a running process seen as paused")
	}
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	eventually(t, 10*time.Second, "stopped process seen as paused", func() bool { return paused(pid) })
	_ = syscall.Kill(pid, syscall.SIGCONT)
	eventually(t, 10*time.Second, "resumed process seen as running", func() bool { return !paused(pid) })
}

// failoverHeader: a primary with standbys in two other sites, every site
// linked to both others.
const failoverHeader = physHeader + `
[[link]]
sites = ["primary", "asia"]
delay = "20ms"
rate = "1gbit"
[node.e1]
site = "eu"
role = "standby"
from = "p1"
[node.a1]
site = "asia"
role = "standby"
from = "p1"
`

// TestFailoverRepointsTheOtherStandbys: the primary of three async
// standbys is killed and e1 promoted; a1 (running) follows e1 at once,
// a2 (down at the promotion) when started: rows written at e1 reach both,
// and the cluster's topology says e1 is the primary and the others its
// standbys.
func TestFailoverRepointsTheOtherStandbys(t *testing.T) {
	t.Parallel()
	_, c, log := testCluster(t, "tfo", failoverHeader+`
[node.a2]
site = "asia"
role = "standby"
from = "p1"
port = 5433
[scheme]
replication = "async"
`)
	ctx := ctxFor(t, 2*time.Minute)
	if err := sqlOn(t, ctx, c, "p1", "CREATE TABLE f (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := sqlOn(t, ctx, c, "p1", "INSERT INTO f SELECT generate_series(1, 100)"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"e1", "a1", "a2"} {
		eventually(t, time.Minute, "rows at "+n, func() bool { return countOn(t, c, n, "SELECT count(*) FROM f") == 100 })
	}
	if err := c.Stop(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Promote(ctx, "e1"); err != nil {
		t.Fatalf("promote e1: %v", err)
	}
	// Promote returned: a1 streams from e1 now.
	if err := sqlOn(t, ctx, c, "e1", "INSERT INTO f SELECT generate_series(101, 150)"); err != nil {
		t.Fatalf("write at the new primary: %v", err)
	}
	eventually(t, time.Minute, "rows written at e1 reach a1", func() bool { return countOn(t, c, "a1", "SELECT count(*) FROM f") == 150 })
	if err := c.Start(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "rows written at e1 reach a2 once started", func() bool { return countOn(t, c, "a2", "SELECT count(*) FROM f") == 150 })

	nodes := map[string]engine.Node{}
	for _, n := range c.Nodes() {
		nodes[n.Name] = n
	}
	if e := nodes["e1"]; e.Role != "primary" || !e.Writable || e.From != "" {
		t.Errorf("e1 after its promotion: %+v", e)
	}
	if nodes["p1"].Writable {
		t.Errorf("the old primary is still writable: %+v", nodes["p1"])
	}
	for _, n := range []string{"a1", "a2"} {
		if s := nodes[n]; s.Role != "standby" || s.From != "e1" || !slices.Equal(s.Upstreams, []string{"e1"}) || s.Writable {
			t.Errorf("%s after the failover: %+v, want a standby of e1", n, s)
		}
	}
	eventually(t, time.Minute, "a2 streaming from e1", func() bool {
		st, err := c.ReplicationState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range st {
			if r.Kind == "physical" && r.State == "streaming" {
				got[r.Node] = r.From
			}
		}
		return got["a1"] == "e1" && got["a2"] == "e1" && len(got) == 2
	})
	var slots string
	_ = c.byName["e1"].query1(ctx, "", "SELECT string_agg(slot_name || ':' || active, ' ' ORDER BY slot_name) FROM pg_replication_slots", &slots)
	if slots != "a1:true a2:true" {
		t.Errorf("slots at e1: %q, want a1 and a2, both in use", slots)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Errorf("markers from the new primary: %v", err)
	}
	if err := c.Start(ctx, "p1"); !errors.Is(err, engine.ErrFailedOver) {
		t.Errorf("start of the old primary: %v, want it refused", err)
	}
	for _, want := range []string{"node a1: re-pointed to e1", "node a1: streaming from e1 on timeline 2", "node a2: re-pointed to e1 in its configuration", "it is down and follows e1 when started"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q", want)
		}
	}
}

// TestFailoverKeepsTheSynchronousStandbys: under ANY 1 (e1, a1), e1
// promoted waits for a1 as the old primary did: a commit at e1 does not
// return while a1 is cut off from it, and does once the link is back.
func TestFailoverKeepsTheSynchronousStandbys(t *testing.T) {
	t.Parallel()
	l, c, _ := testCluster(t, "tfosync", failoverHeader+`
[scheme]
replication = "sync"
standbys = "ANY 1 (e1, a1)"
`)
	ctx := ctxFor(t, 2*time.Minute)
	if err := sqlOn(t, ctx, c, "p1", "CREATE TABLE g (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Promote(ctx, "e1"); err != nil {
		t.Fatalf("promote e1: %v", err)
	}
	var names string
	_ = c.byName["e1"].query1(ctx, "", "SHOW synchronous_standby_names", &names)
	if names != "ANY 1 (a1)" {
		t.Errorf("synchronous_standby_names at the new primary = %q, want ANY 1 (a1)", names)
	}
	if err := sqlOn(t, ctx, c, "e1", "INSERT INTO g VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLink("eu", "asia", true, []string{"down"}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sqlOn(t, ctx, c, "e1", "INSERT INTO g VALUES (2)") }()
	select {
	case err := <-done:
		t.Fatalf("commit at the new primary returned (%v) while its synchronous standby was cut off", err)
	case <-time.After(2 * time.Second):
	}
	if err := l.SetLink("eu", "asia", true, []string{"up"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("commit after the link came back: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the commit did not return after the link came back")
	}
	eventually(t, time.Minute, "both rows at a1", func() bool { return countOn(t, c, "a1", "SELECT count(*) FROM g") == 2 })
}

// TestFailoverCopiesAgainAStandbyThatIsAhead: e1 is cut off from the
// primary while a1 (and a2, cascading from a1) still receive its commits;
// the primary dies and e1 is promoted. a1 has replayed WAL e1 never had, so
// it cannot follow e1's timeline: it is copied again from e1 (losing the
// rows only it had) and streams from e1; then a2, which had the same, is
// copied again from a1.
func TestFailoverCopiesAgainAStandbyThatIsAhead(t *testing.T) {
	t.Parallel()
	l, c, log := testCluster(t, "tfoahead", failoverHeader+`
[node.a2]
site = "asia"
role = "standby"
from = "a1"
port = 5433
[scheme]
replication = "async"
`)
	ctx := ctxFor(t, 2*time.Minute)
	if err := sqlOn(t, ctx, c, "p1", "CREATE TABLE d (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if err := sqlOn(t, ctx, c, "p1", "INSERT INTO d SELECT generate_series(1, 10)"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"e1", "a1", "a2"} {
		eventually(t, time.Minute, "rows at "+n, func() bool { return countOn(t, c, n, "SELECT count(*) FROM d") == 10 })
	}
	if err := l.SetLink("primary", "eu", true, []string{"down"}); err != nil {
		t.Fatal(err)
	}
	if err := sqlOn(t, ctx, c, "p1", "INSERT INTO d SELECT generate_series(11, 30)"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a1", "a2"} {
		eventually(t, time.Minute, "the rows e1 misses at "+n, func() bool { return countOn(t, c, n, "SELECT count(*) FROM d") == 30 })
	}
	if err := c.Kill(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	// The link comes back only after the promotion: the dead primary's
	// kernel still holds the unacknowledged WAL in its socket and would
	// deliver it to e1 as soon as it could (seen in a loaded suite: e1
	// then had all 30 rows and a1 could follow it).
	if err := c.Promote(ctx, "e1"); err != nil {
		t.Fatalf("promote e1: %v", err)
	}
	if err := l.SetLink("primary", "eu", true, []string{"up"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"node a1 cannot follow e1", "copying it again from e1", "node a1: streaming from e1 on timeline 2",
		"node a2 cannot follow a1", "node a2: streaming from a1 on timeline 2"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %q", want)
		}
	}
	for _, n := range []string{"a1", "a2"} {
		if got := countOn(t, c, n, "SELECT count(*) FROM d"); got != 10 {
			t.Errorf("%s has %d rows after its new copy, want e1's 10", n, got)
		}
	}
	if err := sqlOn(t, ctx, c, "e1", "INSERT INTO d SELECT generate_series(101, 105)"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a1", "a2"} {
		eventually(t, time.Minute, "rows written at e1 reach "+n, func() bool { return countOn(t, c, n, "SELECT count(*) FROM d") == 15 })
	}
}
