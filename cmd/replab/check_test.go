package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"replab/internal/history"
)

// writeRunHistory writes ops as DIR/history.jsonl the way the driver
// records it, and returns DIR.
func writeRunHistory(t *testing.T, ops []history.Op) string {
	t.Helper()
	dir := t.TempDir()
	w, err := history.Create(filepath.Join(dir, history.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if _, err := w.Record(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func txn(p int, inv, comp int64, mops ...history.Mop) history.Op {
	return history.Op{Process: p, Node: "eu", Type: history.OK, F: history.FTxn, InvokeNs: inv * 1e6, CompleteNs: comp * 1e6, TxnType: "append", Value: mops}
}

// readSkew is a G-single: T1 reads key 1 before T0's append and key 2
// after it.
var readSkew = []history.Op{
	txn(0, 0, 10, history.Append(1, 10), history.Append(2, 20)),
	txn(1, 1, 11, history.ReadList(1, nil), history.ReadList(2, []int64{20})),
	txn(2, 20, 21, history.ReadList(1, []int64{10}), history.ReadList(2, []int64{20})),
}

func TestCheckCommand(t *testing.T) {
	t.Parallel()
	t.Run("an anomaly: the verdict, its witness, check.json, the EDN, exit 3", func(t *testing.T) {
		dir := writeRunHistory(t, readSkew)
		edn := filepath.Join(t.TempDir(), "history.edn")
		out, code := replab(t, "", "check", dir, "--jepsen-edn", edn)
		if code != 3 {
			t.Errorf("exit %d, want 3\n%s", code, out)
		}
		for _, want := range []string{"weakest model violated: repeatable-read", "G-single: 1 found",
			"T1 -rw-> T0: T1 read key 1 as [], T0 appended 10 to key 1, its first element",
			"wrote " + filepath.Join(dir, "check.json"), "wrote " + edn} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in\n%s", want, out)
			}
		}
		var res map[string]any
		b, err := os.ReadFile(filepath.Join(dir, "check.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &res); err != nil || res["transactions_checked"] != 3.0 {
			t.Errorf("check.json: %v, %v", err, res["transactions_checked"])
		}
		e, err := os.ReadFile(edn)
		if err != nil || strings.Count(string(e), "\n") != 6 || !strings.HasPrefix(string(e), "{:type :invoke, :f :txn, :value [[:append 1 10] [:append 2 20]]") {
			t.Errorf("EDN (%v):\n%s", err, e)
		}
	})
	t.Run("a valid history: exit 0", func(t *testing.T) {
		dir := writeRunHistory(t, []history.Op{readSkew[0], readSkew[2]})
		out, code := replab(t, "", "check", dir)
		if code != 0 || !strings.Contains(out, "strongest model satisfied: strict-serializable") || !strings.Contains(out, "anomalies: none found") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("a history cut short: says so and checks the rest", func(t *testing.T) {
		dir := writeRunHistory(t, readSkew)
		path := filepath.Join(dir, history.FileName)
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(path, b[:len(b)-15], 0o644); err != nil {
			t.Fatal(err)
		}
		out, code := replab(t, "", "check", dir)
		if code != 3 || !strings.Contains(out, "history cut short after 2 complete operations at line 3") || !strings.Contains(out, "checked 2 committed transactions") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("a directory without a history: says what to do", func(t *testing.T) {
		out, code := replab(t, "", "check", t.TempDir())
		if code == 0 || !strings.Contains(out, "has no history.jsonl") || !strings.Contains(out, "[run] history = true") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
	t.Run("--help shows the usage once", func(t *testing.T) {
		out, code := replab(t, "", "check", "--help")
		if code != 0 || strings.Count(out, "Usage:") != 1 || !strings.Contains(out, "-jepsen-edn") {
			t.Errorf("exit %d:\n%s", code, out)
		}
	})
}
