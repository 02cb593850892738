// Package runnertest holds what the runner's integration tests and the HA
// managers' (internal/runner/hatest) check alike. Only tests import it.
package runnertest

import (
	"testing"

	"replab/internal/report"
)

// Verified checks that a run's journal was verified at nodes, and that
// every acknowledged commit is at each of them.
func Verified(t testing.TB, sum *report.Summary, nodes ...string) {
	t.Helper()
	v := sum.Verification
	if v == nil || v.Error != "" {
		t.Fatalf("verification: %+v", v)
	}
	if v.Acked < sum.Transactions || v.Lost != 0 || len(v.Nodes) != len(nodes) {
		t.Errorf("verification: %d acknowledged (%d measured transactions), %d lost, nodes %v", v.Acked, sum.Transactions, v.Lost, v.Nodes)
	}
	for _, n := range nodes {
		nv := v.Nodes[n]
		if nv == nil || nv.Present < v.Acked || nv.Lost != 0 || nv.Unexpected != 0 {
			t.Errorf("node %s: %+v (acknowledged %d)", n, nv, v.Acked)
		}
	}
}
