package engine

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreKnowsNoEngine keeps the core engine-neutral: none of its
// packages depends, even indirectly, on a database driver or an engine
// package (tests aside). A new engine is one package plus one
// registration line in cmd/replab.
func TestCoreKnowsNoEngine(t *testing.T) {
	core := []string{"runner", "driver", "monitor", "lagprobe", "spec", "workload", "report", "stats"}
	for _, p := range core {
		out, err := exec.Command("go", "list", "-deps", "replab/internal/"+p).Output()
		if err != nil {
			t.Skipf("go list: %v (needs the go command)", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/jackc/") || strings.HasPrefix(dep, "github.com/go-sql-driver/") ||
				strings.HasPrefix(dep, "replab/internal/engine/") {
				t.Errorf("internal/%s depends on %s", p, dep)
			}
		}
	}
}
