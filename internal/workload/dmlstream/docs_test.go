package dmlstream

import (
	"testing"

	"replab/internal/engine"
	"replab/internal/engine/postgres"
	"replab/internal/workload/workloadtest"
)

// TestDocs keeps docs/workloads.md in step: every option is documented and
// every dml-stream example builds.
func TestDocs(t *testing.T) {
	workloadtest.CheckDocs(t, engine.NewRegistry(postgres.Engine{}), "../../../docs/workloads.md", Factory,
		[]string{"tables", "rows", "ops_per_tx", "insert", "update", "delete", "row_bytes"}, 1)
}
