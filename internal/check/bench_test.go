package check

import (
	"testing"

	"replab/internal/check/checkgen"
)

func TestGeneratedListAppendHistoriesAreValid(t *testing.T) {
	ops := checkgen.ListAppend(checkgen.Options{Txns: 5000, Seed: 1})
	res, err := Check(ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid() || !res.Complete {
		t.Fatalf("a strictly serializable history was judged %v (skipped %v)", res.Anomalies, res.Skipped)
	}
	if res.TransactionsChecked < 4900 {
		t.Errorf("checked %d transactions", res.TransactionsChecked)
	}
	stale, err := Check(checkgen.ListAppend(checkgen.Options{Txns: 5000, Seed: 1, StaleFraction: 0.01}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !stale.Violated("serializable") && !stale.Violated(StrictSerializable) {
		t.Errorf("stale reads went unnoticed: %v", stale.Anomalies)
	}
}

func TestGeneratedRegisterHistoriesAreValid(t *testing.T) {
	res, err := Check(checkgen.Register(checkgen.Options{Txns: 5000, Seed: 2}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Valid() || !res.Complete {
		t.Fatalf("a strictly serializable register history was judged %v (skipped %v)", res.Anomalies, res.Skipped)
	}
	stale, err := Check(checkgen.Register(checkgen.Options{Txns: 5000, Seed: 2, StaleFraction: 0.01}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !stale.Violated(StrictSerializable) {
		t.Errorf("stale register reads went unnoticed: %v", stale.Anomalies)
	}
}

// BenchmarkCheckListAppend checks a 20,000-transaction list-append history
// (bench/check does 100,000 and writes the figure).
func BenchmarkCheckListAppend(b *testing.B) {
	ops := checkgen.ListAppend(checkgen.Options{Txns: 20_000, Seed: 1})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(ops, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ops))*float64(b.N)/b.Elapsed().Seconds(), "txn/s")
}
