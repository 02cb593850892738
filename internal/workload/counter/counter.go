// Package counter is the smallest complete workload, the example of
// docs/extending.md (which shows this file below this comment): one table
// of counters and one transaction that bumps a random one. It is not
// registered in the replab binary.
package counter

import (
	"context"
	"fmt"
	"math/rand/v2"

	"replab/internal/engine"
	"replab/internal/workload"
)

var Factory = workload.Factory{Kind: "counter", New: func(o *workload.Options) (workload.Workload, error) {
	w := &Workload{n: o.Int("counters", 100, 1, 1_000_000), dialect: o.Dialect}
	if o.Dialect != engine.Postgres && o.Dialect != engine.MySQL {
		return nil, workload.ErrNoDialect("counter", o.Dialect)
	}
	return w, nil
}}

type Workload struct {
	n       int64
	dialect engine.Dialect
}

func (w *Workload) Name() string     { return "counter" }
func (w *Workload) TotalRows() int64 { return w.n }

func (w *Workload) Schema() engine.Schema {
	ddl := "CREATE TABLE counter (id bigint PRIMARY KEY, v bigint NOT NULL)"
	return engine.Schema{Tables: []engine.Table{{Name: "counter", Create: map[engine.Dialect]string{engine.Postgres: ddl, engine.MySQL: ddl}}}}
}

func (w *Workload) Load(ctx context.Context, l workload.Loader, progress func(int64)) error {
	n, err := l.Copy(ctx, "counter", []string{"id", "v"}, &rows{n: w.n})
	progress(n)
	return err
}

func (w *Workload) Transactions() []workload.TxType {
	q := "UPDATE counter SET v = v + 1 WHERE id = $1"
	if w.dialect == engine.MySQL {
		q = "UPDATE counter SET v = v + 1 WHERE id = ?"
	}
	return []workload.TxType{{Name: "bump", Weight: 1,
		Statements: []workload.Statement{{Name: "bump", SQL: q}},
		Run: func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
			id := 1 + r.Int64N(w.n)
			res, err := tx.Exec(ctx, "bump", id)
			if err != nil {
				return 0, fmt.Errorf("bump %d: %w", id, err)
			}
			return res.RowsAffected()
		}}}
}

// rows yields (i, 0) for i in 1..n: a workload.RowSource.
type rows struct{ i, n int64 }

func (r *rows) Next() bool             { r.i++; return r.i <= r.n }
func (r *rows) Values() ([]any, error) { return []any{r.i, int64(0)}, nil }
func (r *rows) Err() error             { return nil }
