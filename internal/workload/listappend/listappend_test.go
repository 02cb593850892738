package listappend

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"replab/internal/report"
	"replab/internal/workload/workloadtest"
)

var update = flag.Bool("update", false, "rewrite testdata/options/*.golden from the current output")

// TestOptionErrors: every bad option is refused at its line, with what to
// write instead (testdata/options: the options and the error expected).
func TestOptionErrors(t *testing.T) {
	workloadtest.OptionErrors(t, Factory, *update)
}

// TestRunsOnTheFakeAndIsChecked runs list-append through replab run's code
// on the fake engine: the history is recorded without [run] history (the
// workload asks for it) and checked when the run ends. One user alone
// sees every append it made, in order: the history satisfies every model.
// Two users on the fake (which keeps the row image a transaction built,
// whatever committed meanwhile: lost updates) are only checked.
func TestRunsOnTheFakeAndIsChecked(t *testing.T) {
	for _, users := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d users", users), func(t *testing.T) {
			b, dir, log := workloadtest.RunOnFakeWith(t, Factory, "keys = 4\nops_per_txn = [1, 3]\nappends_per_key = 8", fmt.Sprintf("users = %d", users))
			var sum struct {
				Complete     bool
				Transactions int64
				Consistency  *report.Consistency
			}
			if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatal(err)
			}
			c := sum.Consistency
			if !sum.Complete || c == nil || c.Error != "" || c.Operations < sum.Transactions || c.MeasureOperations == 0 || c.TransactionsChecked == 0 {
				t.Fatalf("summary %+v, consistency %+v\n%s", sum, c, log)
			}
			for _, f := range []string{"history.jsonl", "check.json", "anomalies.csv"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
			t.Logf("%d operations, %d checked: strongest %s, anomalies %v", c.Operations, c.TransactionsChecked, c.StrongestSatisfied, c.Anomalies)
			if users == 1 && (len(c.Anomalies) != 0 || c.StrongestSatisfied != "strict-serializable" || len(c.SessionGuaranteesViolated) != 0) {
				t.Errorf("one user: strongest %s, anomalies %v, session guarantees violated %v", c.StrongestSatisfied, c.Anomalies, c.SessionGuaranteesViolated)
			}
		})
	}
}
