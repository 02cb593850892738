package rwregister

import (
	"testing"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/workload/workloadtest"
)

// TestDocs keeps docs/workloads.md in step: every option is documented and
// every rw-register example builds.
func TestDocs(t *testing.T) {
	workloadtest.CheckDocs(t, engine.NewRegistry(postgres.Engine{}), "../../../docs/workloads.md", Factory,
		[]string{"keys", "ops_per_txn", "read_share", "key_dist", "writes_per_key", "isolation", "sync_wait", "reads_at"}, 1)
}
