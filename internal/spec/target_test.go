package spec

import (
	"strings"
	"testing"
)

const targetOK = `[target]
name = "prod"
engine = "postgres"
site = "eu"

[target.node.eu1]
role = "primary"
dsn = "host=10.0.0.5 user=replab dbname=app"

[target.node.us1]
role = "standby"
from = "eu1"
dsn = "host=10.0.1.5 user=replab dbname=app"
agent = "10.0.1.5:7070"

[workload]
kind = "personnel"
`

func TestTargetParses(t *testing.T) {
	s, err := Parse("t.toml", []byte(targetOK))
	if err != nil {
		t.Fatal(err)
	}
	tg := s.Target
	if tg == nil || tg.Name != "prod" || s.Lab.Name != "prod" || tg.Schema != DefaultTargetSchema || tg.CreateSchema || tg.ConnectTimeout != DefaultConnectTimeout {
		t.Fatalf("target %+v, lab %+v", tg, s.Lab)
	}
	if len(tg.Nodes) != 2 || tg.Nodes[1].From != "eu1" || tg.Nodes[1].Agent != "10.0.1.5:7070" || tg.Node("us1") == nil {
		t.Errorf("nodes %+v", tg.Nodes)
	}
	if len(s.Sites) != 0 || s.Engine != nil {
		t.Errorf("a target spec built lab parts: %d sites, engine %v", len(s.Sites), s.Engine)
	}
}

func TestTargetErrors(t *testing.T) {
	cases := []struct {
		name, edit, with string
		want             []string
	}{
		{"lab tables", `engine = "postgres"`, "engine = \"postgres\"\n[site.a]\n", nil},
		{"unknown engine", `engine = "postgres"`, `engine = "oracle"`, []string{`t.toml:3: target.engine = "oracle": unknown engine; target mode reads: postgres, mariadb`}},
		{"no from", "from = \"eu1\"\n", "", []string{"t.toml:10: target.node.us1: a standby needs from = the node it replicates from (one of: eu1, us1)"}},
		{"unknown from", `from = "eu1"`, `from = "eu2"`, []string{`t.toml:12: target.node.us1.from: unknown node (did you mean "eu1"?); nodes: eu1, us1`}},
		{"two primaries", `role = "standby"`, `role = "primary"`, []string{"t.toml:11: target.node.us1.role: a second primary (eu1 is one)", "t.toml:12: target.node.us1.from: a primary replicates from no node"}},
		{"no dsn", "dsn = \"host=10.0.1.5 user=replab dbname=app\"\n", "", []string{"t.toml:10: target.node.us1: dsn is required"}},
		{"bad agent", `agent = "10.0.1.5:7070"`, `agent = "10.0.1.5"`, []string{`t.toml:14: target.node.us1.agent = "10.0.1.5": want host:port of a running replab agent`}},
		{"bad schema", `site = "eu"`, "site = \"eu\"\nschema = \"Replab-1\"", []string{`t.toml:5: target.schema = "Replab-1": want 1 to 63 characters`}},
		{"run client", `kind = "personnel"`, "kind = \"personnel\"\n[run]\nclient = \"eu\"", []string{`t.toml:19: run.client = "eu": in target mode replab runs where it is started`}},
		{"no nodes", "", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(targetOK, tc.edit, tc.with, 1)
			switch tc.name {
			case "lab tables":
				tc.want = []string{"t.toml:4: site: a spec with [target] measures existing servers and builds no lab: remove [site]"}
			case "no nodes":
				text = "[target]\nname = \"x\"\nengine = \"postgres\"\n"
				tc.want = []string{"t.toml:1: target: a target needs its servers: add [target.node.NAME] tables with role and dsn"}
			}
			_, err := Parse("t.toml", []byte(text))
			if err == nil {
				t.Fatalf("no error for\n%s", text)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}
