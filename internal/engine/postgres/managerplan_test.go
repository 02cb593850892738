package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

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

const patroniSpec = `
[lab]
name = "pat"
[site.us]
[site.eu]
[[link]]
sites = ["us", "eu"]
delay = "20ms"
[engine]
kind = "postgres"
[node.p1]
site = "us"
role = "primary"
[node.e1]
site = "eu"
role = "standby"
from = "p1"
[node.e1.settings]
work_mem = "8MB"
[node.e2]
site = "eu"
role = "standby"
from = "p1"
[scheme]
replication = "sync"
manager = "patroni"
ttl = "12s"
loop_wait = "2s"
retry_timeout = "5s"
maximum_lag_on_failover = "4MiB"
synchronous_mode_strict = true
nofailover = ["e2"]
nosync = ["e2"]
`

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
	own := raw["postgresql"].(map[string]any)["parameters"].(map[string]any)
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
