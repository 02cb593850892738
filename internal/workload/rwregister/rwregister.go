// Package rwregister is the rw-register workload, made for checking a
// history (docs/consistency.md): transactions of 1–N micro-operations,
// each a read of a key's register or a write of a unique value to it. A
// read names the one write it saw; the version order between writes is
// inferred only where it is certain (a transaction that read a value and
// then wrote one, the process and real-time orders), so it finds less
// than list-append does, and it is what a key-value store's get and put
// can run. Keys are a table of key → value, written in one upsert.
package rwregister

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"

	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/workload"
	"replab/internal/workload/checking"
)

// Factory registers the workload as kind "rw-register".
var Factory = workload.Factory{Kind: "rw-register", New: New}

// Workload is rw-register with its options resolved.
type Workload struct {
	cfg   checking.Config
	gen   *checking.Gen
	plans [][]history.Mop // by user: each touches only its own
}

var statements = map[engine.Dialect][]workload.Statement{
	engine.Postgres: {
		{Name: "read", SQL: "SELECT v FROM rw_register WHERE k = $1"},
		{Name: "write", SQL: "INSERT INTO rw_register (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"},
	},
	engine.MySQL: {
		{Name: "read", SQL: "SELECT v FROM rw_register WHERE k = ?"},
		{Name: "write", SQL: "INSERT INTO rw_register (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)"},
	},
}

// New reads the options: keys, ops_per_txn, read_share, key_dist,
// writes_per_key, isolation, sync_wait and reads_at.
func New(o *workload.Options) (workload.Workload, error) {
	cfg := checking.ReadOptions(o, "rw-register", "writes_per_key")
	if _, ok := statements[o.Dialect]; !ok {
		return nil, workload.ErrNoDialect("rw-register", o.Dialect)
	}
	return &Workload{cfg: cfg, gen: checking.NewGen(cfg), plans: make([][]history.Mop, cfg.Stride)}, nil
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return "rw-register" }

// HistoryByDefault implements workload.HistoryByDefault: its runs record
// and check their history.
func (w *Workload) HistoryByDefault() bool { return true }

// Schema implements workload.Workload: rw_register(k, v).
func (w *Workload) Schema() engine.Schema {
	ddl := "CREATE TABLE rw_register (k bigint PRIMARY KEY, v bigint NOT NULL)"
	return engine.Schema{Tables: []engine.Table{{Name: "rw_register", Create: map[engine.Dialect]string{engine.Postgres: ddl, engine.MySQL: ddl}}}}
}

// RowQueries implements workload.RowLister.
func (w *Workload) RowQueries() map[string]string {
	return map[string]string{"rw_register": "SELECT k, v FROM rw_register"}
}

// TotalRows implements workload.Workload: nothing is loaded (every
// register starts without a value).
func (w *Workload) TotalRows() int64 { return 0 }

// Load implements workload.Workload.
func (w *Workload) Load(ctx context.Context, l workload.Loader, progress func(int64)) error {
	progress(0)
	return nil
}

// Transactions implements workload.Workload: "txn" (reads and writes, at
// least one write) at the source and "read" (reads only) where reads_at
// says. Each measurement starts on keys of its own.
func (w *Workload) Transactions() []workload.TxType {
	w.gen.Fresh()
	return w.cfg.Types(func(name string, write bool, at string) workload.TxType {
		return workload.TxType{Name: name, Statements: statements[w.cfg.Dialect], Session: w.cfg.Session(),
			Run: func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
				return w.run(ctx, tx, r, write)
			}}
	})
}

// run draws a transaction and runs it: each read a SELECT, each write an
// upsert; the recorder gets the plan first and each value as it is read
// (no row: the register's initial nil, left null).
func (w *Workload) run(ctx context.Context, tx *workload.Tx, r *rand.Rand, write bool) (int64, error) {
	plan, err := w.gen.Txn(tx.User, r, write, history.FnWrite, w.plans[tx.User])
	if err != nil {
		return 0, err
	}
	w.plans[tx.User] = plan
	tx.Rec.Record(plan)
	var written int64
	for i := range plan {
		m := &plan[i]
		if m.Fn == history.FnWrite {
			if _, err := tx.Exec(ctx, "write", m.Key, m.Value); err != nil {
				return 0, fmt.Errorf("write %d to key %d: %w", m.Value, m.Key, err)
			}
			written++
			continue
		}
		var v int64
		switch err := tx.QueryRow(ctx, "read", m.Key).Scan(&v); {
		case errors.Is(err, sql.ErrNoRows): // nil: the plan's null
		case err != nil:
			return 0, fmt.Errorf("read key %d: %w", m.Key, err)
		default:
			*m = history.ReadValue(m.Key, v)
		}
	}
	return written, nil
}
