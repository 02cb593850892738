package personnel

import (
	"os"
	"strings"
	"testing"

	"replab/internal/engine/postgres"
	"replab/internal/spec"
	"replab/internal/workload"
)

// TestDocs keeps docs/workloads.md in step: every option is documented and
// every personnel example builds.
func TestDocs(t *testing.T) {
	data, err := os.ReadFile("../../../docs/workloads.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for _, o := range []string{"persons", "text_bytes", "read_pct"} {
		if !strings.Contains(doc, "| `"+o+"` |") {
			t.Errorf("docs/workloads.md has no row for option `%s`", o)
		}
	}
	examples := 0
	for i, b := range strings.Split(doc, "```toml\n")[1:] {
		b = b[:strings.Index(b, "```")]
		if !strings.Contains(b, `kind = "personnel"`) {
			continue
		}
		examples++
		if !strings.Contains(b, "[lab]") {
			b = specWith(1, strings.TrimPrefix(strings.TrimSpace(b), "[workload]\nkind = \"personnel\"\n"))
		}
		s, err := spec.Parse("workloads.md", []byte(b))
		if err != nil {
			t.Errorf("block %d: %v", i+1, err)
			continue
		}
		if err := (postgres.Engine{}).Validate(s); err != nil {
			t.Errorf("block %d: %v", i+1, err)
		}
		if _, err := workload.NewRegistry(Factory).For(s, "postgres"); err != nil {
			t.Errorf("block %d: %v", i+1, err)
		}
	}
	if examples < 2 {
		t.Errorf("%d personnel examples in docs/workloads.md, want 2", examples)
	}
}
