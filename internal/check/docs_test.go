package check

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDocModelsTableMatchesViolates: docs/consistency.md's table of which
// anomaly rules out which model is the code's table, row for row.
func TestDocModelsTableMatchesViolates(t *testing.T) {
	b, err := os.ReadFile("../../docs/consistency.md")
	if err != nil {
		t.Fatal(err)
	}
	abbrev := map[string]string{"SSer": StrictSerializable, "Ser": "serializable", "SI": "snapshot-isolation",
		"RR": "repeatable-read", "RC": "read-committed", "RU": "read-uncommitted",
		"ss-Ser": "strong-session-serializable", "ss-SI": "strong-session-snapshot-isolation",
		"ss-RR": "strong-session-repeatable-read", "ss-RC": "strong-session-read-committed", "ss-RU": "strong-session-read-uncommitted"}
	var cols []string
	rows := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) == 12 && cells[0] == "anomaly" {
			cols = cells[1:]
			continue
		}
		if cols == nil || len(cells) != 12 || !strings.HasPrefix(cells[0], "`") {
			continue
		}
		class := strings.Trim(cells[0], "`")
		var ms []string
		for i, c := range cells[1:] {
			if c == "✗" {
				ms = append(ms, abbrev[cols[i]])
			}
		}
		rows[class] = ms
	}
	if len(rows) == 0 {
		t.Fatal("no models table in docs/consistency.md")
	}
	for class, want := range Violates {
		got, ok := rows[class]
		if !ok {
			t.Errorf("the docs have no row for %s", class)
			continue
		}
		if !sameSet(got, want) {
			t.Errorf("%s: the docs say it rules out %v, the code %v", class, got, want)
		}
	}
	for class := range rows {
		if _, ok := Violates[class]; !ok {
			t.Errorf("the docs have a row for %s, which the code does not know", class)
		}
	}
	for _, m := range append(slices.Clone(Models), SessionModels...) {
		found := false
		for _, v := range abbrev {
			found = found || v == m
		}
		if !found {
			t.Errorf("model %s has no column", m)
		}
	}
}
