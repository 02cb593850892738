package hatest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/labtest"
	"replab/internal/report"
	"replab/internal/runner"
	"replab/internal/runner/runnertest"
	"replab/internal/spec"
	"replab/internal/testkit"
	"replab/internal/workload"
	"replab/internal/workload/kvinsert"
)

// Patroni over three sites 10 ms apart, synchronous_mode, with short
// timers: the leader key lives 5 s, Patroni loops every second.
var patroniTrioSpec = testkit.ReadFile("testdata/patroni-trio.toml")

// TestPatroniKillOfThePrimaryFailsOverAndRejoins: the primary killed -9
// with its Patroni; Patroni promotes a standby once the leader key has
// expired, the clients (a libpq host list) follow it, nothing
// acknowledged is lost (synchronous_mode), no two nodes acknowledge at
// once, and the old primary, started again, comes back as a standby by
// itself (pg_rewind). Nothing is left behind: no etcd, no Patroni, no
// server.
func TestPatroniKillOfThePrimaryFailsOverAndRejoins(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Postgres, testkit.Patroni)
	start := time.Now()
	sum, out, log, dataRoot := runHASpec(t, fmt.Sprintf(patroniTrioSpec, labtest.UniqueName("tpat")))
	t.Logf("run took %.1f s", time.Since(start).Seconds())
	if len(sum.Faults) != 1 || sum.Faults[0].HA == nil {
		t.Fatalf("faults %+v\n%s", sum.Faults, log)
	}
	f := sum.Faults[0]
	h := f.HA
	if h.OldPrimary != "p1" || (h.NewPrimary != "e1" && h.NewPrimary != "a1") {
		t.Errorf("old primary %q, new %q\n%s", h.OldPrimary, h.NewPrimary, log)
	}
	// The leader key lives 5 s; Patroni loops every second.
	if h.PromotedS == nil || *h.PromotedS < 1 || *h.PromotedS > 5+2+2+5 {
		t.Errorf("promoted after %v s", h.PromotedS)
	}
	if h.ElectedS == nil || h.ClientsS == nil || *h.ClientsS < *h.PromotedS {
		t.Errorf("elected %v, clients wrote at the new primary %v (promoted %v)", h.ElectedS, h.ClientsS, h.PromotedS)
	}
	if f.UnavailableS <= 0 || f.UnavailableS > 20 {
		t.Errorf("no commit for %.2f s", f.UnavailableS)
	}
	if h.Lost == nil || *h.Lost != 0 {
		t.Errorf("synchronous_mode lost %v acknowledged commits (by %v)", h.Lost, h.LostBy)
	}
	if sb := h.SplitBrain; sb == nil || sb.AckedOverlapMs != 0 || sb.LosingSideWrites != 0 || sb.Surviving == nil {
		t.Errorf("split brain %+v", sb)
	}
	if rj := h.Rejoin; rj == nil || !rj.Rejoined || rj.RejoinedS == nil || rj.RedundantS == nil {
		t.Errorf("rejoin %+v\n%s", rj, log)
	}
	runnertest.Verified(t, sum, "p1", "e1", "a1")
	if len(sum.HA) != 1 || sum.HA[0].N != 1 || sum.HA[0].Rejoined != 1 {
		t.Errorf("ha %+v", sum.HA)
	}
	if b, err := os.ReadFile(filepath.Join(out, report.NodeRolesFile)); err != nil || !strings.Contains(string(b), "p1,server,primary,") {
		t.Errorf("%s: %v\n%s", report.NodeRolesFile, err, b)
	}
	if left := processesUnder(dataRoot); len(left) > 0 {
		t.Errorf("left running: %s", strings.Join(left, "; "))
	}
	if t.Failed() {
		return // a figure below may be missing
	}
	t.Logf("no commit for %.2f s; promoted %.2f s, elected %.2f s, clients %.2f s; rejoined %.2f s after the start, redundant %.2f s",
		f.UnavailableS, *h.PromotedS, *h.ElectedS, *h.ClientsS, *h.Rejoin.RejoinedS, *h.Rejoin.RedundantS)
}

// TestPatroniKillThroughHAProxy: the same kill with the clients behind
// haproxy in their site, which health-checks each Patroni's GET /primary:
// they follow the new primary once haproxy marks it up, and the journal
// still knows which node took each commit (the servers say their names).
func TestPatroniKillThroughHAProxy(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Postgres, testkit.Patroni, testkit.HAProxy)
	text := strings.Replace(fmt.Sprintf(patroniTrioSpec, labtest.UniqueName("tpha")), `manager = "patroni"`, "manager = \"patroni\"\nroute = \"haproxy\"", 1)
	sum, _, log, dataRoot := runHASpec(t, text)
	if !strings.Contains(log, "route: haproxy") || len(sum.Faults) != 1 || sum.Faults[0].HA == nil {
		t.Fatalf("faults %+v\n%s", sum.Faults, log)
	}
	h := sum.Faults[0].HA
	if h.OldPrimary != "p1" || h.NewPrimary == "" || h.ClientsS == nil || h.SplitBrain == nil || h.SplitBrain.AckedOverlapMs != 0 {
		t.Errorf("ha %+v\n%s", h, log)
	}
	if h.Lost == nil || *h.Lost != 0 {
		t.Errorf("lost %v", h.Lost)
	}
	if _, ok := sum.Roles["haproxy-us"]; !ok {
		t.Errorf("haproxy is not among the monitored processes: %v", sum.Roles)
	}
	if left := processesUnder(dataRoot); len(left) > 0 {
		t.Errorf("left running: %s", strings.Join(left, "; "))
	}
	if t.Failed() {
		return // a figure below may be missing
	}
	t.Logf("no commit for %.2f s; promoted %.2f s, clients %.2f s (haproxy marks a server up after 2 checks 3 s apart)", sum.Faults[0].UnavailableS, *h.PromotedS, *h.ClientsS)
}

// TestRepmgrKillOfThePrimaryFailsOverAndRejoins: repmgrd on every node
// (asynchronous replication, as repmgr runs it), the primary killed with
// its repmgrd: the standbys' repmgrd give up on it after 2 attempts 1 s
// apart, one is promoted and the other follows it, the clients (libpq
// host list) follow; the old primary, healed, is rejoined to the new one
// (repmgr node rejoin --force-rewind: what an operator does; repmgr never
// does it by itself). Nothing is left behind.
func TestRepmgrKillOfThePrimaryFailsOverAndRejoins(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Postgres, testkit.Repmgr)
	text := fmt.Sprintf(patroniTrioSpec, labtest.UniqueName("trep"))
	i := strings.Index(text, "[scheme]")
	j := strings.Index(text, "[workload]")
	text = text[:i] + `[scheme]
replication = "async"
manager = "repmgr"
reconnect_attempts = 2
reconnect_interval = "1s"
monitor_interval = "1s"
` + text[j:]
	start := time.Now()
	sum, _, log, dataRoot := runHASpec(t, text)
	t.Logf("run took %.1f s", time.Since(start).Seconds())
	t.Cleanup(func() { // before the data root goes: what repmgr said
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dataRoot, "*", "ha-*", "repmgr*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("%s:\n%s", l, strings.Join(lines[max(0, len(lines)-25):], "\n"))
			}
		}
	})
	if len(sum.Faults) != 1 || sum.Faults[0].HA == nil {
		t.Fatalf("faults %+v\n%s", sum.Faults, log)
	}
	f := sum.Faults[0]
	h := f.HA
	if h.OldPrimary != "p1" || (h.NewPrimary != "e1" && h.NewPrimary != "a1") || h.PromotedS == nil || h.ClientsS == nil {
		t.Fatalf("ha %+v\n%s", h, log)
	}
	if *h.PromotedS > 20 || f.UnavailableS > 25 {
		t.Errorf("promoted after %.2f s, no commit for %.2f s", *h.PromotedS, f.UnavailableS)
	}
	if h.Lost == nil || h.SplitBrain == nil || h.SplitBrain.AckedOverlapMs != 0 {
		t.Fatalf("lost %v, split brain %+v\n%s", h.Lost, h.SplitBrain, log)
	}
	if rj := h.Rejoin; rj == nil || !rj.Rejoined {
		t.Errorf("rejoin %+v\n%s", rj, log)
	}
	if _, ok := sum.Roles["p1"]["repmgrd"]; !ok {
		t.Errorf("repmgrd is not among the monitored processes: %v", sum.Roles["p1"])
	}
	if left := processesUnder(dataRoot); len(left) > 0 {
		t.Errorf("left running: %s", strings.Join(left, "; "))
	}
	if t.Failed() {
		return // a figure below may be missing
	}
	t.Logf("no commit for %.2f s; promoted %.2f s, clients %.2f s; lost %d; rejoined %.2f s after the start, redundant %.2f s",
		f.UnavailableS, *h.PromotedS, *h.ClientsS, *h.Lost, *h.Rejoin.RejoinedS, *h.Rejoin.RedundantS)
}

// pgafTrioScheme is pg_auto_failover over the three sites of
// patroniTrioSpec, its monitor in asia, with short timers: health checks
// every second, the primary unhealthy after 2 s, promoted 3 s after the
// standbys have reported their positions; a primary cut off demotes
// itself after 3 s.
const pgafTrioScheme = `[scheme]
replication = "sync"
manager = "pg_auto_failover"
monitor_site = "asia"
health_check_period = "1s"
health_check_timeout = "2s"
health_check_max_retries = 1
health_check_retry_delay = "500ms"
node_considered_unhealthy_timeout = "2s"
primary_demote_timeout = "3s"
network_partition_timeout = "3s"
`

// TestPgAutoFailoverKillOfThePrimaryFailsOverAndRejoins: pg_auto_failover
// (a keeper on every node, the monitor in asia, both standbys in the
// replication quorum), the primary killed -9 with its pg_autoctl: the
// monitor finds it unhealthy, waits primary_demote_timeout and promotes a
// standby, the clients (libpq host list) follow, nothing acknowledged is
// lost (synchronous replication), no two nodes acknowledge at once, and
// the old primary, started again, comes back as a standby by itself
// (pg_autoctl rewinds it). Nothing is left behind: no monitor, no
// pg_autoctl, no server.
func TestPgAutoFailoverKillOfThePrimaryFailsOverAndRejoins(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Postgres, testkit.PgAutoFailover)
	text := fmt.Sprintf(patroniTrioSpec, labtest.UniqueName("tpaf"))
	i := strings.Index(text, "[scheme]")
	j := strings.Index(text, "[workload]")
	text = text[:i] + pgafTrioScheme + text[j:]
	// 45 s measured: on a starved machine (a clean-clone suite beside it)
	// the monitor elected e1 28 s after the kill, past a 30 s window.
	text = strings.Replace(text, `duration = "24s"`, `duration = "45s"`, 1)
	text = strings.Replace(text, "at = \"3s\"\nfor = \"8s\"", "at = \"3s\"\nfor = \"16s\"", 1)
	start := time.Now()
	sum, out, log, dataRoot := runHASpec(t, text)
	t.Logf("run took %.1f s", time.Since(start).Seconds())
	if len(sum.Faults) != 1 || sum.Faults[0].HA == nil {
		t.Fatalf("faults %+v\n%s", sum.Faults, log)
	}
	f := sum.Faults[0]
	h := f.HA
	if h.OldPrimary != "p1" || (h.NewPrimary != "e1" && h.NewPrimary != "a1") || h.PromotedS == nil || h.ClientsS == nil {
		t.Fatalf("ha %+v\n%s", h, log)
	}
	// Unhealthy after 2 s (and a failed health check), the standbys'
	// positions, then 3 s; each step takes a keeper's loop or a restart.
	if *h.PromotedS < 3 || *h.PromotedS > 40 {
		t.Errorf("promoted after %.2f s", *h.PromotedS)
	}
	if h.ElectedS == nil || *h.ClientsS < *h.PromotedS {
		t.Errorf("elected %v, clients wrote at the new primary %v (promoted %v)", h.ElectedS, h.ClientsS, *h.PromotedS)
	}
	if f.UnavailableS <= 0 || f.UnavailableS > 42 {
		t.Errorf("no commit for %.2f s", f.UnavailableS)
	}
	if h.Lost == nil || *h.Lost != 0 {
		t.Errorf("synchronous replication lost %v acknowledged commits (by %v)", h.Lost, h.LostBy)
	}
	if sb := h.SplitBrain; sb == nil || sb.AckedOverlapMs != 0 || sb.LosingSideWrites != 0 || sb.Surviving == nil {
		t.Errorf("split brain %+v", sb)
	}
	if rj := h.Rejoin; rj == nil || !rj.Rejoined || rj.RejoinedS == nil || rj.RedundantS == nil {
		t.Errorf("rejoin %+v\n%s", rj, log)
	}
	runnertest.Verified(t, sum, "p1", "e1", "a1")
	if _, ok := sum.Roles["p1"]["pg_autoctl"]; !ok {
		t.Errorf("pg_autoctl is not among the monitored processes: %v", sum.Roles["p1"])
	}
	if _, ok := sum.Roles["monitor-asia"]["monitor"]; !ok {
		t.Errorf("the monitor is not among the monitored processes: %v", sum.Roles)
	}
	if b, err := os.ReadFile(filepath.Join(out, report.NodeRolesFile)); err != nil || !strings.Contains(string(b), "p1,manager,primary,") {
		t.Errorf("%s: %v\n%s", report.NodeRolesFile, err, b)
	}
	if _, err := os.Stat(filepath.Join(out, "logs", "monitor-pg_autoctl.log")); err != nil {
		t.Errorf("the monitor's log was not kept: %v", err)
	}
	if left := append(processesUnder(dataRoot), pgautoctlsUnder(dataRoot)...); len(left) > 0 {
		t.Errorf("left running: %s", strings.Join(left, "; "))
	}
	if t.Failed() {
		return // a figure below may be missing
	}
	t.Logf("no commit for %.2f s; promoted %.2f s, elected %.2f s, clients %.2f s; rejoined %.2f s after the start, redundant %.2f s",
		f.UnavailableS, *h.PromotedS, *h.ElectedS, *h.ClientsS, *h.Rejoin.RejoinedS, *h.Rejoin.RedundantS)
}

// TestPgAutoFailoverKillThroughHAProxy: the same kill with the clients
// behind haproxy in their site, which runs a check per node that asks the
// monitor for the node's state: the clients follow the new primary once
// haproxy marks it up, and the journal knows which node took each commit
// (the address the server was reached at: pg_auto_failover's nodes share
// one configuration, so none has a name of its own).
func TestPgAutoFailoverKillThroughHAProxy(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Postgres, testkit.PgAutoFailover, testkit.HAProxy)
	text := fmt.Sprintf(patroniTrioSpec, labtest.UniqueName("tpah"))
	i := strings.Index(text, "[scheme]")
	j := strings.Index(text, "[workload]")
	text = text[:i] + pgafTrioScheme + "route = \"haproxy\"\n" + text[j:]
	text = strings.Replace(text, "at = \"3s\"\nfor = \"8s\"", "at = \"3s\"\nfor = \"16s\"", 1)
	// The clients write at the new primary once haproxy has seen it up
	// twice, 3 s apart, after the promotion: 5 s after the kill alone, 18 s
	// on a suite's loaded machine (a run of 24 s ended first).
	text = strings.Replace(text, `duration = "24s"`, `duration = "36s"`, 1)
	sum, _, log, dataRoot := runHASpec(t, text)
	if !strings.Contains(log, "route: haproxy") || len(sum.Faults) != 1 || sum.Faults[0].HA == nil {
		t.Fatalf("faults %+v\n%s", sum.Faults, log)
	}
	h := sum.Faults[0].HA
	if h.OldPrimary != "p1" || h.NewPrimary == "" || h.ClientsS == nil || h.SplitBrain == nil || h.SplitBrain.AckedOverlapMs != 0 {
		t.Fatalf("ha %+v\n%s", h, log)
	}
	if h.Lost == nil || *h.Lost != 0 {
		t.Errorf("lost %v", h.Lost)
	}
	if _, ok := sum.Roles["haproxy-us"]; !ok {
		t.Errorf("haproxy is not among the monitored processes: %v", sum.Roles)
	}
	if left := append(processesUnder(dataRoot), pgautoctlsUnder(dataRoot)...); len(left) > 0 {
		t.Errorf("left running: %s", strings.Join(left, "; "))
	}
	if t.Failed() {
		return // a figure below may be missing
	}
	t.Logf("no commit for %.2f s; promoted %.2f s, clients %.2f s (haproxy marks a server up after 2 checks 3 s apart)", sum.Faults[0].UnavailableS, *h.PromotedS, *h.ClientsS)
}

// pgautoctlsUnder lists the pg_autoctl processes whose environment names
// dir: pg_autoctl's services rename themselves ("pg_autoctl: node
// active"), so their command lines no longer say which lab they serve.
func pgautoctlsUnder(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.HasPrefix(b, []byte("pg_autoctl")) && !bytes.Contains(b, []byte("/pg_autoctl")) {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && bytes.Contains(env, []byte(dir)) {
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// runHASpec runs spec text (its [[fault]]s included) on PostgreSQL and
// returns the summary, the results directory, the log and the data root.
func runHASpec(t *testing.T, text string) (*report.Summary, string, string, string) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var log bytes.Buffer
	opt := runner.Options{Engines: engine.NewRegistry(postgres.Engine{}), Workloads: workload.NewRegistry(kvinsert.Factory)}
	opt.Out, opt.StateRoot, opt.DataRoot, opt.Log, opt.Version = filepath.Join(dir, "results"), t.TempDir(), t.TempDir(), &log, "test"
	sum, _, err := runner.Run(ctx, s, opt)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	return sum, opt.Out, log.String(), opt.DataRoot
}

// processesUnder lists the processes whose command line names dir: a
// run's etcd, Patroni and servers all do.
func processesUnder(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if cl := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cl, dir) {
			out = append(out, e.Name()+" "+cl)
		}
	}
	return out
}
