package spec

import (
	"strings"
	"testing"
)

const clientBase = `[lab]
name = "c"
[site.london]
[site.frankfurt]
[[link]]
sites = ["london", "frankfurt"]
delay = "20ms"
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
`

func TestClientGroups(t *testing.T) {
	s, err := Parse("c.toml", []byte(clientBase+`
[run]
duration = "10s"

[[client]]
site = "london"
users = 2
reads = "none"

[[client]]
name = "readers"
site = "frankfurt"
users = 6
writes = "none"
reads = "nearest"
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Clients) != 2 || s.Run.Users != 8 {
		t.Fatalf("clients %+v, users %d: want 2 groups, 8 users", s.Clients, s.Run.Users)
	}
	want := []Client{{Name: "london", Site: "london", Users: 2, Writes: ClientNearest, Reads: ClientNone, Line: 23},
		{Name: "readers", Site: "frankfurt", Users: 6, Writes: ClientNone, Reads: ClientNearest, Line: 28}}
	for i, c := range s.Clients {
		if c != want[i] {
			t.Errorf("client %d: %+v, want %+v", i, c, want[i])
		}
	}
	for u, name := range map[int]string{0: "london", 1: "london", 2: "readers", 7: "readers"} {
		if c := s.ClientOf(u); c == nil || c.Name != name {
			t.Errorf("user %d in %v, want %s", u, c, name)
		}
	}
	if s.ClientOf(8) != nil {
		t.Error("user 8 has a group")
	}
}

func TestClientGroupErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"[[client]]\nsite = \"paris\"\n", `c.toml:20: client[1].site = "paris": unknown site`},
		{"[[client]]\nusers = 2\n", "c.toml:19: client[1]: site is required"},
		{"[[client]]\nsite = \"london\"\nwrites = \"primary\"\n", `client[1].writes = "primary": want "nearest"`},
		{"[[client]]\nsite = \"london\"\nreads = \"none\"\nwrites = \"none\"\n", "neither reads nor writes"},
		{"[[client]]\nsite = \"london\"\n[[client]]\nsite = \"london\"\n", `a second group named "london"`},
		{"[[client]]\nsite = \"london\"\nusers = 0\n", "want between 1 and 10000 users"},
		{"[[client]]\nsite = \"london\"\ncolour = 1\n", "client[1].colour: unknown key"},
		{"[run]\nusers = 4\n[[client]]\nsite = \"london\"\n", "c.toml:20: run.users: not with [[client]] groups"},
		{"[run]\nclient = \"london\"\n[[client]]\nsite = \"london\"\n", "run.client: not with [[client]] groups"},
		{"[run]\nrate = \"10/s\"\n[[client]]\nsite = \"london\"\n", "run.rate: not with [[client]] groups"},
	} {
		_, err := Parse("c.toml", []byte(clientBase+c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}
