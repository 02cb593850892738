package kvinsert

import (
	"testing"

	"replab/internal/engine"
	"replab/internal/engine/postgres"

	"replab/internal/workload/workloadtest"
)

// TestDocs keeps docs/workloads.md in step: every option is documented and
// every kv-insert example builds.
func TestDocs(t *testing.T) {
	workloadtest.CheckDocs(t, engine.NewRegistry(postgres.Engine{}), "../../../docs/workloads.md", Factory, []string{"preload", "key_bytes", "value_bytes"}, 1)
}
