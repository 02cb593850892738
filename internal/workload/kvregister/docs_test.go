package kvregister

import (
	"testing"

	"replab/internal/engine"
	"replab/internal/engine/bdbje"
	"replab/internal/workload/workloadtest"
)

// TestDocs keeps docs/workloads.md in step: every option is documented and
// every kv-register example builds.
func TestDocs(t *testing.T) {
	workloadtest.CheckDocs(t, engine.NewRegistry(bdbje.Engine{}), "../../../docs/workloads.md", Factory,
		[]string{"keys", "ops_per_txn", "read_share", "reads_at", "consistency", "consistency_timeout"}, 1)
}
