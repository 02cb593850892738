package orderentry

import (
	"testing"

	"replab/internal/engine"
	"replab/internal/engine/postgres"

	"replab/internal/workload/workloadtest"
)

// TestDocs keeps docs/workloads.md in step: every option is documented and
// every order-entry example builds.
func TestDocs(t *testing.T) {
	options := []string{"customers", "warehouses", "browse_max", "reads_at", "delay"}
	for _, name := range typeNames {
		options = append(options, "weight_"+name)
	}
	workloadtest.CheckDocs(t, engine.NewRegistry(postgres.Engine{}), "../../../docs/workloads.md", Factory, options, 1)
}
