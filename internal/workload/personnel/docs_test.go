package personnel

import (
	"testing"

	"replab/internal/engine"
	"replab/internal/engine/postgres"

	"replab/internal/workload/workloadtest"
)

// TestDocs keeps docs/workloads.md in step: every option is documented and
// every personnel example builds.
func TestDocs(t *testing.T) {
	workloadtest.CheckDocs(t, engine.NewRegistry(postgres.Engine{}), "../../../docs/workloads.md", Factory, []string{"persons", "text_bytes", "read_pct", "reads_at"}, 2)
}
