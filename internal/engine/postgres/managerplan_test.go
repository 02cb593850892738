package postgres

import (
	"context"
	"encoding/json"
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
