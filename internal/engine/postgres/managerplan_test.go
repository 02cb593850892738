package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"replab/internal/testkit"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/lab"
	"replab/internal/spec"
)

// A manager that never elects ends the wait with that said, within its
// bound; two primaries at once are said as split brain.
func TestWaitPrimaryIsBounded(t *testing.T) {
	c := &cluster{plan: &plan{manager: &managerPlan{kind: ManagerPatroni, ttl: 10 * time.Second, loopWait: 2 * time.Second, retryTimeout: 4 * time.Second}}}
	if b := c.plan.manager.electionBound(); b != 52*time.Second {
		t.Errorf("bound %s, want 52s", b)
	}
	start := time.Now()
	_, err := c.waitPrimaryWithin(context.Background(), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "manager patroni elected no primary within 300ms") || time.Since(start) > 2*time.Second {
		t.Errorf("no primary: %v after %s", err, time.Since(start))
	}
	c.plan.primaries = []string{"p1", "e1"}
	if _, err := c.waitPrimaryWithin(context.Background(), 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "split brain") {
		t.Errorf("two primaries: %v", err)
	}
	c.plan.primaries = []string{"e1"}
	if p, err := c.waitPrimaryWithin(context.Background(), time.Second); p != "e1" || err != nil {
		t.Errorf("one primary: %q %v", p, err)
	}
}

func TestEtcdTimingsFollowTheRoundTrip(t *testing.T) {
	for _, tc := range []struct{ rtt, hb, el time.Duration }{
		{0, 100 * time.Millisecond, time.Second},
		{40 * time.Millisecond, 100 * time.Millisecond, time.Second},
		{110 * time.Millisecond, 110 * time.Millisecond, 1100 * time.Millisecond},
	} {
		if hb, el := etcdTimings(tc.rtt); hb != tc.hb || el != tc.el {
			t.Errorf("rtt %s: heartbeat %s election %s", tc.rtt, hb, el)
		}
	}
}

var patroniSpec = testkit.ReadFile("testdata/patroni.toml")

// The plan's knobs reach Patroni's configuration as Patroni spells them;
// replab's settings go into the store's, a node's own into its own.
func TestPatroniConfig(t *testing.T) {
	s, err := spec.Parse("p.toml", []byte(patroniSpec))
	if err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(s)
	if err != nil {
		t.Fatal(err)
	}
	if p.route != RouteLibpq || !reflect.DeepEqual(p.manager.storeSites, []string{"us", "eu"}) {
		t.Errorf("route %q, store %v", p.route, p.manager.storeSites)
	}
	c := &cluster{lab: &lab.Lab{Spec: s}, plan: p, inst: &install{BinDir: "/usr/lib/postgresql/15/bin"},
		store: &store{members: []*etcdMember{{client: netip.MustParseAddrPort("198.18.0.1:2379")}, {client: netip.MustParseAddrPort("198.18.0.2:2379")}}}}
	n := &node{Node: *s.Node("e1"), c: c, addr: netip.MustParseAddrPort("198.18.0.2:5432"), dataDir: "/d/pg-e1", sockDir: "/s/e1",
		ha: &haNode{dir: "/d/ha-e1", rest: netip.MustParseAddrPort("198.18.0.2:8008")}}
	b, _ := json.Marshal(c.patroniConfig(n))
	var got struct {
		Scope, Name string
		Etcd3       struct{ Hosts []string }
		Tags        map[string]bool
	}
	_ = json.Unmarshal(b, &got)
	var raw map[string]any
	_ = json.Unmarshal(b, &raw)
	dcs := raw["bootstrap"].(map[string]any)["dcs"].(map[string]any)
	for k, want := range map[string]any{"ttl": 12.0, "loop_wait": 2.0, "retry_timeout": 5.0, "maximum_lag_on_failover": float64(4 << 20),
		"synchronous_mode": true, "synchronous_mode_strict": true} {
		if dcs[k] != want {
			t.Errorf("dcs %s = %v, want %v", k, dcs[k], want)
		}
	}
	pg := dcs["postgresql"].(map[string]any)
	params := pg["parameters"].(map[string]any)
	if pg["use_pg_rewind"] != true || params["wal_log_hints"] != "on" || params["shared_buffers"] != "64MB" || params["synchronous_standby_names"] != nil {
		t.Errorf("dcs postgresql %v", pg)
	}
	local := raw["postgresql"].(map[string]any)
	if local["remove_data_directory_on_rewind_failure"] != true || local["remove_data_directory_on_diverged_timelines"] != false {
		t.Errorf("postgresql: remove_data_directory_on_rewind_failure %v, remove_data_directory_on_diverged_timelines %v",
			local["remove_data_directory_on_rewind_failure"], local["remove_data_directory_on_diverged_timelines"])
	}
	own := local["parameters"].(map[string]any)
	if own["replab.node"] != "e1" || own["work_mem"] != "8MB" || own["unix_socket_directories"] != "/s/e1" {
		t.Errorf("e1's own parameters %v", own)
	}
	if got.Name != "e1" || got.Scope != "replab-pat" || !reflect.DeepEqual(got.Etcd3.Hosts, []string{"198.18.0.1:2379", "198.18.0.2:2379"}) ||
		raw["restapi"].(map[string]any)["listen"] != "198.18.0.2:8008" || len(got.Tags) != 0 {
		t.Errorf("%s", b)
	}
	n.Node = *s.Node("e2")
	b, _ = json.Marshal(c.patroniConfig(n))
	_ = json.Unmarshal(b, &raw)
	if tags := raw["tags"].(map[string]any); tags["nofailover"] != true || tags["nosync"] != true {
		t.Errorf("e2's tags %v", tags)
	}
}

// haproxy forwards to the node whose Patroni answers GET /primary, with
// the timings of Patroni's own template.
func TestHAProxyConfig(t *testing.T) {
	s, err := spec.Parse("p.toml", []byte(strings.Replace(patroniSpec, `manager = "patroni"`, "manager = \"patroni\"\nroute = \"haproxy\"", 1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(s)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{lab: &lab.Lab{Spec: s}, plan: p}
	for i, name := range []string{"p1", "e1", "e2"} {
		c.nodes = append(c.nodes, &node{Node: *s.Node(name), addr: netip.MustParseAddrPort(fmt.Sprintf("198.18.0.%d:5432", i+1)),
			ha: &haNode{rest: netip.MustParseAddrPort(fmt.Sprintf("198.18.0.%d:%d", i+1, 8008+i))}})
	}
	got := c.haproxyConfig(netip.MustParseAddrPort("198.18.0.9:5000"), "")
	for _, want := range []string{"bind 198.18.0.9:5000", "option httpchk GET /primary", "http-check expect status 200",
		"default-server inter 3s fall 3 rise 2 on-marked-down shutdown-sessions",
		"server p1 198.18.0.1:5432 check addr 198.18.0.1 port 8008", "server e2 198.18.0.3:5432 check addr 198.18.0.3 port 8010"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if !strings.Contains(c.Route(), "haproxy") {
		t.Errorf("route %q", c.Route())
	}
}

// repmgr's configuration carries the plan's knobs as repmgr spells them.
func TestRepmgrConfig(t *testing.T) {
	text := strings.NewReplacer(`replication = "sync"`, `replication = "async"`, `manager = "patroni"`, `manager = "repmgr"`).Replace(patroniSpec)
	i := strings.Index(text, `ttl = "12s"`)
	text = text[:i] + "reconnect_attempts = 3\nreconnect_interval = \"2s\"\nmonitor_interval = \"1s\"\npriority = { e2 = 0 }\nlocation = \"site\"\n"
	s, err := spec.Parse("r.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(s)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{lab: &lab.Lab{Spec: s}, plan: p, inst: &install{BinDir: "/b"}}
	n := &node{Node: *s.Node("e2"), addr: netip.MustParseAddrPort("198.18.0.2:5433"), dataDir: "/d/pg-e2", logPath: "/d/ha-e2/postgresql.log",
		ha: &haNode{dir: "/d/ha-e2", config: "/d/ha-e2/repmgr.conf"}}
	got := c.repmgrConfig(n, 3)
	for _, want := range []string{"node_id=3", "node_name='e2'", "conninfo='host=198.18.0.2 port=5433 user=postgres dbname=postgres connect_timeout=2'",
		"location='eu'", "priority=0", "failover='automatic'", "reconnect_attempts=3", "reconnect_interval=2", "monitor_interval_secs=1",
		"promote_command='/b/repmgr standby promote -f /d/ha-e2/repmgr.conf --log-to-file'",
		"follow_command='/b/repmgr standby follow -f /d/ha-e2/repmgr.conf --log-to-file --upstream-node-id=%n'",
		"service_start_command='/b/pg_ctl -D /d/pg-e2 -l /d/ha-e2/postgresql.log -w -t 120 start'"} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if b := p.manager.electionBound(); b != 3*2*time.Second+2*time.Second+30*time.Second {
		t.Errorf("bound %s", b)
	}
}

var pgafSpec = testkit.ReadFile("testdata/pgaf.toml")

// pg_auto_failover's knobs: its own defaults when the spec says nothing
// (which warn: a primary cut off keeps its role as long as the monitor
// waits before promoting another), the spec's otherwise; candidate
// priorities and the replication quorum per node.
func TestPgAutoFailoverPlan(t *testing.T) {
	s, err := spec.Parse("a.toml", []byte(pgafSpec))
	if err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(s)
	if err != nil {
		t.Fatal(err)
	}
	m := p.manager
	if m.kind != ManagerPgAF || m.monitorSite != "asia" || m.unhealthyTimeout != 20*time.Second || m.demoteTimeout != 30*time.Second ||
		m.partitionTimeout != 20*time.Second || m.healthCheckPeriod != 5*time.Second || m.numberSyncStandbys != -1 || p.route != RouteHAProxy {
		t.Errorf("defaults: %+v", m)
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0].Error(), "two primaries meanwhile") {
		t.Errorf("warnings %v", w)
	}
	if m.candidatePriority("e1") != 50 || !m.inQuorum("a1", true) || m.inQuorum("a1", false) {
		t.Errorf("priority %d, quorum %t %t", m.candidatePriority("e1"), m.inQuorum("a1", true), m.inQuorum("a1", false))
	}
	if got, want := m.electionBound(), 20*time.Second+5*time.Second+5*time.Second+2*(5+2)*time.Second+30*time.Second+30*time.Second; got != want {
		t.Errorf("election bound %s, want %s", got, want)
	}
	if st := p.managerStages(); !reflect.DeepEqual(st, []string{"pg_autoctl", "postgres"}) {
		t.Errorf("stages %v", st)
	}

	text := strings.Replace(pgafSpec, `route = "haproxy"`, `priority = { a1 = 0 }
replication_quorum = { a1 = false }
number_sync_standbys = 0
health_check_period = "1s"
health_check_timeout = "2s"
health_check_max_retries = 1
health_check_retry_delay = "1s"
node_considered_unhealthy_timeout = "5s"
primary_demote_timeout = "8s"
network_partition_timeout = "4s"
wal_sender_timeout = "4s"`, 1)
	s, err = spec.Parse("b.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if p, err = makePlan(s); err != nil {
		t.Fatal(err)
	}
	m = p.manager
	if m.candidatePriority("a1") != 0 || m.inQuorum("a1", true) || !m.inQuorum("e1", true) || m.numberSyncStandbys != 0 ||
		m.walSenderTimeout != 4*time.Second || m.healthCheckDelay != time.Second || p.route != RouteLibpq {
		t.Errorf("knobs: %+v", m)
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("warnings %v", w)
	}
	if d := m.describe(); !strings.Contains(d, "monitor in asia") || !strings.Contains(d, "primary_demote_timeout 8s") || !strings.Contains(d, "number_sync_standbys 0") {
		t.Errorf("describe: %s", d)
	}
}

// The monitor's states as roles: primary while it assigns a primary's
// state (whatever the node's health: it still holds the role), streaming
// for a secondary as assigned, down when unhealthy, replica in between.
func TestPgAutoFailoverRoles(t *testing.T) {
	for _, tc := range []struct {
		st    pgafState
		known bool
		want  string
	}{
		{pgafState{"primary", "primary", 1}, true, engine.RolePrimary},
		{pgafState{"primary", "primary", 0}, true, engine.RolePrimary},
		{pgafState{"stop_replication", "wait_primary", 1}, true, engine.RolePrimary},
		{pgafState{"primary", "demote_timeout", 0}, true, engine.RoleDown},
		{pgafState{"secondary", "secondary", 1}, true, engine.RoleStreaming},
		{pgafState{"prepare_promotion", "stop_replication", 1}, true, engine.RoleReplica},
		{pgafState{"demoted", "catchingup", 1}, true, engine.RoleReplica},
		{pgafState{}, false, engine.RoleDown},
	} {
		if got := pgafRole(tc.st, tc.known); got != tc.want {
			t.Errorf("%+v known %t: %s, want %s", tc.st, tc.known, got, tc.want)
		}
	}
}

// Under pg_auto_failover haproxy runs a check per node that asks the
// monitor for the node's state.
func TestHAProxyConfigPgAutoFailover(t *testing.T) {
	s, err := spec.Parse("a.toml", []byte(pgafSpec))
	if err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(s)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{lab: &lab.Lab{Spec: s}, plan: p, inst: &install{BinDir: "/b"},
		monitor: &pgafMonitor{addr: netip.MustParseAddrPort("198.18.0.3:5431")}}
	for i, name := range []string{"p1", "e1", "a1"} {
		c.nodes = append(c.nodes, &node{Node: *s.Node(name), addr: netip.MustParseAddrPort(fmt.Sprintf("198.18.0.%d:5432", i+1)), ha: &haNode{}})
	}
	got := c.haproxyConfig(netip.MustParseAddrPort("198.18.0.9:5000"), "/h/check-pgaf.sh")
	for _, want := range []string{"    external-check\n    insecure-fork-wanted\n", "option external-check", "external-check command /h/check-pgaf.sh",
		"default-server inter 3s fall 3 rise 2 on-marked-down shutdown-sessions", "server a1 198.18.0.3:5432 check\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	script := c.pgafCheckScript()
	for _, want := range []string{`/b/psql "host=198.18.0.3 port=5431 user=autoctl_node dbname=pg_auto_failover connect_timeout=2"`,
		"nodename = '$HAPROXY_SERVER_NAME' AND goalstate IN ('single', 'wait_primary', 'primary', 'join_primary', 'apply_settings') AND reportedstate IN"} {
		if !strings.Contains(script, want) {
			t.Errorf("no %q in\n%s", want, script)
		}
	}
	if !strings.Contains(c.Route(), "pg_auto_failover's monitor") {
		t.Errorf("route %q", c.Route())
	}
}
