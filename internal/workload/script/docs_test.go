package script

import (
	"testing"

	"replab/internal/engine"
	"replab/internal/engine/postgres"

	"replab/internal/workload/workloadtest"
)

// TestDocs keeps docs/workloads.md in step: every option is documented and
// every script example builds (from the repository's root, where the
// examples' paths start).
func TestDocs(t *testing.T) {
	t.Chdir("../../..")
	workloadtest.CheckDocs(t, engine.NewRegistry(postgres.Engine{}), "docs/workloads.md", Factory, []string{"schema", "load", "transactions", "scale", "reads_at"}, 1)
}
