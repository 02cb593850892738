package listappend

import (
	"flag"
	"testing"

	"replab/internal/workload/workloadtest"
)

var update = flag.Bool("update", false, "rewrite testdata/options/*.golden from the current output")

// TestOptionErrors: every bad option is refused at its line, with what to
// write instead (testdata/options: the options and the error expected).
func TestOptionErrors(t *testing.T) {
	workloadtest.OptionErrors(t, Factory, *update)
}
