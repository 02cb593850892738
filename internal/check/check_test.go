package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"replab/internal/check/checkgen"
	"replab/internal/history"
)

func TestRefusedHistories(t *testing.T) {
	cases := []struct {
		name string
		h    hist
		want string
	}{
		{"a value appended twice to a key", hist{}.ok(0, 0, 1, ap(1, 10)).ok(1, 2, 3, ap(1, 10)),
			"op 1: appends 10 to key 1, as op 0 did: appended and written values must be unique per key"},
		{"a value appended twice by one transaction", hist{}.ok(0, 0, 1, ap(1, 10), ap(1, 10)),
			"op 0: appends 10 to key 1, as op 0 did"},
		{"a value written twice, once by a failed transaction", hist{}.tx(0, fail, 0, 1, wr(1, 5)).ok(1, 2, 3, wr(1, 5)),
			"op 1: writes 5 to key 1, as op 0 did"},
		{"a key used as a list and a register", hist{}.ok(0, 0, 1, ap(1, 10)).ok(1, 2, 3, wr(1, 5)),
			"op 1: uses key 1 as a register ([w 1 5]), which op 0 used as a list: a key holds a list or a register, not both"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Check(c.h, Options{})
			var oe *OpError
			if !errors.As(err, &oe) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want an OpError containing %q", err, c.want)
			}
		})
	}
}

func TestInfoOperations(t *testing.T) {
	t.Run("an info append no read observed is undecided and left out", func(t *testing.T) {
		res, err := Check(hist{}.tx(0, info, 0, 10, ap(1, 10)).ok(1, 20, 30, rl(1)).tx(2, info, 0, 5, rl(2)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.InfoUndecided != 1 || res.TransactionsChecked != 1 || !res.Valid() {
			t.Errorf("undecided %d, checked %d, anomalies %v; want 1, 1, none", res.InfoUndecided, res.TransactionsChecked, res.Anomalies)
		}
	})
	t.Run("an info append a read observed committed, at any time after its invocation", func(t *testing.T) {
		// The read comes after the info op gave up: fine, it committed late.
		res, err := Check(hist{}.tx(0, info, 0, 10, ap(1, 10), ap(2, 20)).ok(1, 20, 30, rl(1, 10)).ok(2, 40, 50, rl(2, 20)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.InfoUndecided != 0 || res.TransactionsChecked != 3 || !res.Valid() {
			t.Errorf("undecided %d, checked %d, anomalies %v; want 0, 3, none", res.InfoUndecided, res.TransactionsChecked, res.Anomalies)
		}
	})
	t.Run("an observed info append is in the graph: a read that misses it after another read saw it", func(t *testing.T) {
		res, err := Check(hist{}.tx(0, info, 0, 10, ap(1, 10)).ok(1, 20, 30, rl(1, 10)).ok(2, 40, 50, rl(1)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Anomalies[GSingle+RealtimeSuffix] != 1 {
			t.Errorf("anomalies %v, want G-single-realtime", res.Anomalies)
		}
	})
}

func TestBudgetsCheckInPartAndSaySo(t *testing.T) {
	stale := checkgen.ListAppend(checkgen.Options{Txns: 3000, Seed: 7, StaleFraction: 0.02})
	t.Run("operations beyond MaxOps only name writers", func(t *testing.T) {
		res, err := Check(stale, Options{MaxOps: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if res.Complete || res.Operations.Skipped != 2000 || !strings.Contains(strings.Join(res.Skipped, "\n"), "operations from index 1000 on (2000 of 3000) were not checked, for the budget of 1000 operations") {
			t.Errorf("complete %v, skipped ops %d, notes %q", res.Complete, res.Operations.Skipped, res.Skipped)
		}
		if res.Anomalies[GarbageRead] != 0 {
			t.Errorf("reads of values written beyond the budget were taken for garbage: %v", res.Anomalies)
		}
	})
	t.Run("a history estimated above MaxMemoryBytes is checked in part", func(t *testing.T) {
		res, err := Check(stale, Options{MaxMemoryBytes: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		if res.Complete || !strings.Contains(strings.Join(res.Skipped, "\n"), "for the memory budget of 1 MiB") || res.Operations.Skipped == 0 {
			t.Errorf("complete %v, notes %q", res.Complete, res.Skipped)
		}
	})
	t.Run("a search that runs out of steps reports the cycle it found and says so", func(t *testing.T) {
		res, err := Check(stale, Options{SearchSteps: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Complete || !strings.Contains(strings.Join(res.Skipped, "\n"), "stopped after 1 steps each") || res.Valid() {
			t.Errorf("complete %v, anomalies %v, notes %q", res.Complete, res.Anomalies, res.Skipped)
		}
	})
	t.Run("a time budget that runs out stops the cycle search and says so", func(t *testing.T) {
		res, err := Check(stale, Options{MaxDuration: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Complete || !strings.Contains(strings.Join(res.Skipped, "\n"), "time budget of 1ns ran out") {
			t.Errorf("complete %v, notes %q", res.Complete, res.Skipped)
		}
		var text bytes.Buffer
		_ = res.WriteText(&text, 0)
		if !strings.Contains(text.String(), "checked in part:") || !strings.Contains(text.String(), "(in the part checked)") {
			t.Errorf("the text does not say the check was partial:\n%s", text.String())
		}
	})
}

func writeHistory(t *testing.T, ops []history.Op) (path string, data []byte) {
	t.Helper()
	path = filepath.Join(t.TempDir(), history.FileName)
	w, err := history.Create(path)
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
	data, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

func TestFile(t *testing.T) {
	skew := hist{}.ok(0, 0, 10, ap(1, 10), ap(2, 20)).ok(1, 1, 11, rl(1), rl(2, 20)).ok(2, 20, 21, rl(1, 10))
	t.Run("checks a history file", func(t *testing.T) {
		path, _ := writeHistory(t, skew)
		res, err := File(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Anomalies[GSingle] != 1 || res.HistoryCutShort != nil || !res.Complete {
			t.Errorf("anomalies %v, cut %v", res.Anomalies, res.HistoryCutShort)
		}
	})
	t.Run("a history cut short is checked up to the cut, and says so", func(t *testing.T) {
		path, data := writeHistory(t, skew)
		if err := os.WriteFile(path, data[:len(data)-20], 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := File(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.HistoryCutShort == nil || res.HistoryCutShort.AfterOps != 2 || res.HistoryCutShort.Line != 3 || res.Complete {
			t.Fatalf("cut %+v, complete %v", res.HistoryCutShort, res.Complete)
		}
		if !strings.Contains(res.HistoryCutShort.Message, "history cut short after 2 complete operations at line 3") {
			t.Errorf("message %q", res.HistoryCutShort.Message)
		}
		var b bytes.Buffer
		if err := res.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(b.Bytes(), &back); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"transactions_checked", "anomalies", "witnesses", "models_satisfied", "models_violated",
			"strongest_satisfied", "weakest_violated", "info_undecided", "skipped", "history_cut_short"} {
			if _, ok := back[k]; !ok {
				t.Errorf("check.json has no %q", k)
			}
		}
	})
	t.Run("a refused history names the lines", func(t *testing.T) {
		path, _ := writeHistory(t, hist{}.ok(0, 0, 1, ap(1, 10)).ok(1, 2, 3, ap(1, 11)).ok(1, 4, 5, ap(1, 10)))
		_, err := File(path, Options{})
		if err == nil || !strings.Contains(err.Error(), "op 2 (line 3): appends 10 to key 1, as op 0 (line 1) did") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("a malformed line before the end is an error with file:line", func(t *testing.T) {
		path, data := writeHistory(t, skew)
		lines := strings.SplitAfter(string(data), "\n")
		lines[1] = "{oops}\n"
		if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := File(path, Options{})
		if err == nil || !strings.Contains(err.Error(), path+":2: malformed JSON") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("a missing file", func(t *testing.T) {
		if _, err := File(filepath.Join(t.TempDir(), "none.jsonl"), Options{}); err == nil {
			t.Error("no error")
		}
	})
}

func TestCheckJSONIsStable(t *testing.T) {
	res, err := Check(anomalyCases()[0].history, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := res.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "check.json", b.Bytes())
}

func TestEdgeCases(t *testing.T) {
	cases := []struct {
		name    string
		h       hist
		checked int
		skipped []string
	}{
		{"an empty history", nil, 0, nil},
		{"only failed transactions", hist{}.tx(0, fail, 0, 1, ap(1, 1)).tx(1, fail, 0, 1, wr(2, 1)), 0, nil},
		{"an operation whose f is not txn", append(hist{}.ok(0, 0, 1, ap(1, 1)), history.Op{Index: 1, Type: ok, F: "read-lag", Value: []history.Mop{rl(1, 1)}}), 1,
			[]string{`1 operations whose f is not "txn" were not checked`}},
		{"a transaction with no micro-operations", hist{}.ok(0, 0, 1), 1, nil},
		{"a key only ever read as null", hist{}.ok(0, 0, 1, rnil(9)), 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Check(c.h, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Valid() || res.TransactionsChecked != c.checked || strings.Join(res.Skipped, "\n") != strings.Join(c.skipped, "\n") {
				t.Errorf("anomalies %v, checked %d, skipped %q", res.Anomalies, res.TransactionsChecked, res.Skipped)
			}
			var b bytes.Buffer
			if err := res.WriteText(&b, 3); err != nil {
				t.Fatal(err)
			}
		})
	}
}
