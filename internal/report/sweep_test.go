package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestSweepTableGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "sweep", "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sw Sweep
	if err := json.Unmarshal(b, &sw); err != nil {
		t.Fatal(err)
	}
	// One failed point renders as such instead of breaking the table.
	sw.Points = append(sw.Points, SweepPoint{Label: "failed point", Values: map[string]any{}, Dir: "p99"})
	var out bytes.Buffer
	PrintSweep(&out, &sw)
	golden(t, "sweep-table.golden", out.Bytes())
}
