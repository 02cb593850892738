package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"replab/internal/report"
)

// TestFakeClientGroups: a writer group beside the primary and a reader
// group beside the standby, on the fake (changes arrive 5 ms after their
// commit). Each group runs only its own kind of transaction where it is
// told to, is measured on its own, and the readers' stale reads are
// counted as theirs.
func TestFakeClientGroups(t *testing.T) {
	t.Parallel()
	text := strings.Replace(fakeSpec("", ""), "kind = \"kv-insert\"",
		"kind = \"list-append\"\nkeys = 4\nops_per_txn = [1, 2]\nread_share = 0.6", 1)
	text = strings.Replace(text, "users = 2\n", "", 1)
	text += `
[[client]]
name = "writers"
site = "a"
users = 1
reads = "none"

[[client]]
name = "readers"
site = "b"
users = 2
writes = "none"
reads = "nearest"
`
	_, out, log, err := fakeRun(t, text)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var sum report.Summary
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	w, r := sum.Clients["writers"], sum.Clients["readers"]
	if w == nil || r == nil || w.Users != 1 || r.Users != 2 || sum.Users != 3 {
		t.Fatalf("clients %+v, users %d", sum.Clients, sum.Users)
	}
	if _, ok := w.Types["txn"]; !ok || len(w.Types) != 1 || w.Transactions == 0 {
		t.Errorf("writers ran %v", w.Types)
	}
	if _, ok := r.Types["read"]; !ok || len(r.Types) != 1 || r.Transactions == 0 {
		t.Errorf("readers ran %v", r.Types)
	}
	if w.Transactions+r.Transactions != sum.Transactions {
		t.Errorf("groups %d + %d, run %d", w.Transactions, r.Transactions, sum.Transactions)
	}
	// The readers read at the standby beside them, and miss some writes;
	// the writers' transactions read at the primary, and miss none.
	st := sum.StaleReads
	if st == nil || st.Nodes["s"] == nil || st.Nodes["p"] == nil {
		t.Fatalf("stale reads by node %+v", st)
	}
	if r.StaleReads == nil || r.StaleReads.Reads != st.Nodes["s"].Reads || r.StaleReads.Stale == 0 {
		t.Errorf("readers' stale reads %+v, the standby's %+v", r.StaleReads, st.Nodes["s"])
	}
	if w.StaleReads == nil || w.StaleReads.Reads != st.Nodes["p"].Reads || w.StaleReads.Stale != 0 {
		t.Errorf("writers' stale reads %+v, the primary's %+v", w.StaleReads, st.Nodes["p"])
	}
	if !strings.Contains(log, "in groups writers: 1 in a (writes nearest, reads none); readers: 2 in b (writes none, reads nearest)") {
		t.Errorf("the run does not say who runs where:\n%s", log)
	}
	var buf strings.Builder
	report.PrintSummary(&buf, &sum)
	if !strings.Contains(buf.String(), "readers     b") {
		t.Errorf("the terminal summary has no clients block:\n%s", buf.String())
	}
}

// TestFakeTwoMastersLoseAndDivergeRows: read-modify-write appends on two
// keys at two masters of the fake, which applies each other's rows over
// its own: the history shows lost updates, and the copies diverge row by
// row (convergence.diverged_rows).
func TestFakeTwoMastersLoseAndDivergeRows(t *testing.T) {
	t.Parallel()
	text := strings.NewReplacer("role = \"primary\"", "role = \"master\"", "role = \"standby\"\nfrom = \"p\"", "role = \"master\"",
		"[scheme]\n", "[scheme]\nreplication = \"multimaster\"\n",
		"kind = \"kv-insert\"", "kind = \"list-append\"\nkeys = 2\nops_per_txn = 1\nread_share = 0\nread_before_write = true\nappends_per_key = 100000",
		// Rows diverge when the last writes of a key at both masters cross:
		// with 5 ms per hop a loaded machine's users wrote each key's last
		// append further apart than that (converged, 1 run in 4); with
		// 300 ms both masters write every key within its crossing.
		`delay = "5ms"`, `delay = "300ms"`).Replace(fakeSpec("", ""))
	_, out, log, err := fakeRun(t, text)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var sum report.Summary
	b, _ := os.ReadFile(filepath.Join(out, "summary.json"))
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	c, conv := sum.Consistency, sum.Convergence
	if c == nil || c.Anomalies["lost-update"] == 0 {
		t.Errorf("anomalies %v: want lost updates", c)
	}
	if conv == nil || conv.Converged || conv.DivergedRows == nil || *conv.DivergedRows == 0 || *conv.DivergedRows > 2 {
		t.Fatalf("convergence %+v: want 1 or 2 of the 2 rows diverged", conv)
	}
	t.Logf("lost updates %d, anomalies %v, rows diverged %d", c.Anomalies["lost-update"], c.Anomalies, *conv.DivergedRows)
}
