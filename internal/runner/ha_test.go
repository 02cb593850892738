package runner

import (
	"testing"
	"time"

	"replab/internal/engine"
)

// roles is a role history handed in as it is.
type roles []engine.RolePeriod

func (r roles) RoleHistory() ([]engine.RolePeriod, time.Duration) { return r, 100 * time.Millisecond }

// TestNotRedundant: the cluster is redundant again when the servers'
// latest roles are one primary and every other node streaming; ended
// periods and the managers' view do not count.
func TestNotRedundant(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	open := func(node, role string) engine.RolePeriod {
		return engine.RolePeriod{Node: node, Source: engine.RoleFromServer, Role: role, Start: t0}
	}
	ended := func(node, role string) engine.RolePeriod {
		p := open(node, role)
		p.End = t0.Add(time.Second)
		return p
	}
	nodes := []engine.Node{{Name: "p1"}, {Name: "e1"}, {Name: "a1"}}
	for _, tc := range []struct {
		name string
		h    roles
		want string
	}{
		{"redundant", roles{ended("p1", "primary"), open("p1", "streaming"), open("e1", "primary"), open("a1", "streaming")}, ""},
		{"the old primary rewinding", roles{ended("p1", "primary"), open("p1", "down"), open("e1", "primary"), open("a1", "streaming")}, "p1 down"},
		{"a standby not streaming", roles{open("p1", "primary"), open("e1", "replica"), open("a1", "streaming")}, "e1 replica"},
		{"two primaries", roles{open("p1", "primary"), open("e1", "primary"), open("a1", "streaming")}, "primaries p1, e1"},
		{"no primary, one node never seen", roles{open("p1", "down"), open("e1", "streaming")}, "p1 down; a1 unknown; no primary"},
		{"the manager's view is not the server's", roles{open("p1", "primary"), open("e1", "streaming"), open("a1", "streaming"),
			{Node: "a1", Source: engine.RoleFromManager, Role: "down", Start: t0}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := notRedundant(tc.h, nodes); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
