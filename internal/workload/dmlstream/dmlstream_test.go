package dmlstream

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"replab/internal/workload/workloadtest"
)

func newWorkload(t *testing.T, opts string) (*Workload, error) {
	t.Helper()
	w, err := workloadtest.Build(t, Factory, 1, opts, "postgres")
	if err != nil {
		return nil, err
	}
	return w.(*Workload), nil
}

// TestOptionErrors: options out of range, or a stream that could change
// nothing, are refused at their lines.
func TestOptionErrors(t *testing.T) {
	for _, tc := range []struct{ opts, want string }{
		{"tables = 0\n", "workload.tables"},
		{"ops_per_tx = 20000\n", "workload.ops_per_tx"},
		{"insert = 0\nupdate = 0\ndelete = 0\n", "all 0"},
		{"rows = 0\ninsert = 0\n", "find nothing to change"},
		{"row_bytes = 0\n", "workload.row_bytes"},
		{"operations = -1\n", "workload.operations"},
	} {
		_, err := newWorkload(t, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "unit.toml:") {
			t.Errorf("%q: %v, want an error naming %s with its line", tc.opts, err, tc.want)
		}
	}
}

// TestOperations: operations asks the run for whole transactions of
// ops_per_tx, rounded up; none without it.
func TestOperations(t *testing.T) {
	for _, tc := range []struct {
		opts string
		want int64
	}{
		{"", 0},
		{"operations = 1000000\n", 100_000},
		{"operations = 1000001\n", 100_001},
		{"operations = 7\nops_per_tx = 3\n", 3},
		{"operations = 5\nops_per_tx = 100\n", 1},
	} {
		w, err := newWorkload(t, tc.opts)
		if err != nil {
			t.Fatalf("%q: %v", tc.opts, err)
		}
		if got := w.MeasureTransactions(); got != tc.want {
			t.Errorf("%q: %d transactions, want %d", tc.opts, got, tc.want)
		}
	}
}

// TestStream: a transaction holds ops_per_tx operations over every table,
// in the mix's proportions (within 2 % on a fixed seed), inserts with keys
// above everything loaded and never twice, payloads of row_bytes.
func TestStream(t *testing.T) {
	w, err := newWorkload(t, "tables = 4\nrows = 1000\nops_per_tx = 7\ninsert = 60\nupdate = 30\ndelete = 10\nrow_bytes = 33\n")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	count := map[byte]int{}
	tables := map[byte]bool{}
	ids := map[string]bool{}
	const txs = 5000
	for i := 0; i < txs; i++ {
		calls := w.batch(0, r, nil)
		if len(calls) != 7 {
			t.Fatalf("transaction of %d operations, want 7", len(calls))
		}
		for _, c := range calls {
			count[c.Stmt[0]]++
			tables[c.Stmt[1]] = true
			switch c.Stmt[0] {
			case 'i':
				key := fmt.Sprint(c.Stmt, ":", c.Args[0])
				if id := c.Args[0].(int64); id <= 1000 || ids[key] {
					t.Fatalf("insert id %d: at or below the loaded rows, or twice", id)
				}
				ids[key] = true
				if p := c.Args[2].(string); len(p) != 33 {
					t.Fatalf("payload of %d bytes, want 33", len(p))
				}
				if c.Rows != 1 {
					t.Errorf("an insert must change 1 row, the call says %d", c.Rows)
				}
			case 'u', 'd':
				if c.Rows != -1 {
					t.Errorf("an update or delete may find its row gone: Rows %d, want -1", c.Rows)
				}
			}
		}
	}
	if len(tables) != 4 {
		t.Errorf("operations on %d tables, want 4", len(tables))
	}
	for op, want := range map[byte]float64{'i': 0.6, 'u': 0.3, 'd': 0.1} {
		got := float64(count[op]) / (txs * 7)
		if math.Abs(got-want) > 0.02 {
			t.Errorf("op %c: share %.3f, want %.2f", op, got, want)
		}
	}
}
