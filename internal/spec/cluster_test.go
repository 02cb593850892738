package spec

import (
	"testing"
	"time"
)

func TestPgQuorumExampleParses(t *testing.T) {
	s, err := Load("../../examples/pg-quorum.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Engine == nil || s.Engine.Kind != "postgres" {
		t.Fatalf("engine %+v", s.Engine)
	}
	want := []Node{
		{Name: "p1", Site: "primary", Role: "primary"},
		{Name: "e1", Site: "eu", Role: "standby", From: "p1"},
		{Name: "a1", Site: "asia", Role: "standby", From: "p1"},
	}
	if len(s.Nodes) != len(want) {
		t.Fatalf("nodes %+v", s.Nodes)
	}
	for i, w := range want {
		n := s.Nodes[i]
		if n.Name != w.Name || n.Site != w.Site || n.Role != w.Role || n.From != w.From {
			t.Errorf("node %d = %+v, want %+v", i, n, w)
		}
	}
	if sc := s.Scheme; sc.Replication != "sync" || sc.Options["standbys"] != "ANY 1 (e1, a1)" || sc.Options["commit"] != "remote_apply" {
		t.Errorf("scheme %+v", sc)
	}
	if got := s.Errorf("scheme.commit", "x").Error(); got != "../../examples/pg-quorum.toml:39: scheme.commit: x" {
		t.Errorf("Errorf points at %q", got)
	}
	if l := s.Line("node.e1.from"); l != 29 {
		t.Errorf("node.e1.from on line %d, want 29", l)
	}
}

func TestNodeDetailsParse(t *testing.T) {
	s, err := Parse("n.toml", []byte(`
[lab]
name = "n"
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
[engine]
kind = "postgres"
[node.p]
site = "a"
role = "primary"
port = 6000
[node.p.settings]
shared_buffers = "64MB"
max_connections = 50
fsync = false
[node.r]
site = "b"
role = "replica"
from = "p"
apply_delay = "30s"
[[node.r.table]]
name = "per"
where = "per_id % 2 = 0"
columns = ["per_id", "last_name"]
[scheme]
replication = "snapshot"
refresh = "1m"
wal_compression = true
`))
	if err != nil {
		t.Fatal(err)
	}
	p, r := s.Node("p"), s.Node("r")
	if p.Port != 6000 || p.Settings["shared_buffers"] != "64MB" || p.Settings["max_connections"] != "50" || p.Settings["fsync"] != "off" {
		t.Errorf("p = %+v", p)
	}
	if r.ApplyDelay != 30*time.Second || len(r.Tables) != 1 || r.Tables[0].Where != "per_id % 2 = 0" || len(r.Tables[0].Columns) != 2 {
		t.Errorf("r = %+v", r)
	}
	o := s.SchemeOptions("engine test")
	if d, wc := o.Duration("refresh", 0, time.Second, time.Hour), o.Bool("wal_compression"); d != time.Minute || wc == nil || !*wc || o.Err() != nil {
		t.Errorf("scheme = %+v: refresh %s, wal_compression %v, %v", s.Scheme, d, wc, o.Err())
	}
}

func TestPgPersonnelExampleParses(t *testing.T) {
	s, err := Load("../../examples/pg-personnel.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Workload == nil || s.Workload.Kind != "personnel" || s.Workload.Options["persons"] != int64(20000) {
		t.Fatalf("workload %+v", s.Workload)
	}
	r := s.Run
	if r.Users != 8 || r.Warmup != 5*time.Second || r.Duration != 20*time.Second || r.RatePerSec != 0 || r.Cooldown != DefaultCooldown {
		t.Errorf("run %+v", r)
	}
	if len(s.Nodes) != 3 || s.Scheme.Options["standbys"] != "ANY 1 (e1, a1)" {
		t.Errorf("nodes/scheme differ from pg-quorum: %+v %+v", s.Nodes, s.Scheme)
	}
}

func TestTxRates(t *testing.T) {
	for in, want := range map[string]float64{"60/min": 1, "5000/s": 5000, "3600/h": 1, "0.5/s": 0.5} {
		got, msg := parseTxRate(in)
		if msg != "" || got != want {
			t.Errorf("%q = %v (%s), want %v", in, got, msg, want)
		}
	}
	for _, bad := range []string{"60", "x/s", "-1/s", "1/fortnight", "0/s"} {
		if _, msg := parseTxRate(bad); msg == "" {
			t.Errorf("%q: want an error", bad)
		}
	}
}
