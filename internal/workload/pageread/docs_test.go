package pageread

import (
	"testing"

	"replab/internal/engine"
	"replab/internal/engine/xrootd"
	"replab/internal/workload/workloadtest"
)

// TestDocs keeps docs/workloads.md in step: every option is documented and
// the example builds.
func TestDocs(t *testing.T) {
	workloadtest.CheckDocs(t, engine.NewRegistry(xrootd.Engine{}), "../../../docs/workloads.md", Factory,
		[]string{"page_size", "order", "connections", "slow_factor", "node", "verify"}, 1)
}
