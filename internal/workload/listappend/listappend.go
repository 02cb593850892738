// Package listappend is Elle's list-append workload, made for checking a
// history (docs/consistency.md): transactions of 1–N micro-operations,
// each a read of a key's list or an append of a unique value to it. A
// read shows every append before it, in order, so the checker recovers
// each key's version order from the reads and finds the anomalies the
// isolation level and the replication scheme let through. Keys are a table
// of key → text list ('1,2,3'), appended to in one statement.
package listappend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/workload"
	"replab/internal/workload/checking"
)

// Factory registers the workload as kind "list-append".
var Factory = workload.Factory{Kind: "list-append", New: New}

// Workload is list-append with its options resolved.
type Workload struct {
	cfg   checking.Config
	gen   *checking.Gen
	users []user // by user: each touches only its own
}

// user is one user's memory from one transaction to the next.
type user struct {
	plan  []history.Mop
	elems []int64 // the lists read in the transaction
}

var statements = map[engine.Dialect][]workload.Statement{
	engine.Postgres: {
		{Name: "read", SQL: "SELECT v FROM list_append WHERE k = $1"},
		{Name: "append", SQL: "INSERT INTO list_append AS t (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = t.v || ',' || $2"},
	},
	engine.MySQL: {
		{Name: "read", SQL: "SELECT v FROM list_append WHERE k = ?"},
		{Name: "append", SQL: "INSERT INTO list_append (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = CONCAT(v, ',', ?)"},
	},
}

// New reads the options: keys, ops_per_txn, read_share, key_dist,
// appends_per_key, isolation, sync_wait and reads_at.
func New(o *workload.Options) (workload.Workload, error) {
	cfg := checking.ReadOptions(o, "list-append", "appends_per_key")
	if _, ok := statements[o.Dialect]; !ok {
		return nil, workload.ErrNoDialect("list-append", o.Dialect)
	}
	return &Workload{cfg: cfg, gen: checking.NewGen(cfg), users: make([]user, cfg.Stride)}, nil
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return "list-append" }

// HistoryByDefault implements workload.HistoryByDefault: its runs record
// and check their history.
func (w *Workload) HistoryByDefault() bool { return true }

// Schema implements workload.Workload: list_append(k, v), v the list's
// elements as text, oldest first, separated by commas.
func (w *Workload) Schema() engine.Schema {
	ddl := "CREATE TABLE list_append (k bigint PRIMARY KEY, v text NOT NULL)"
	return engine.Schema{Tables: []engine.Table{{Name: "list_append", Create: map[engine.Dialect]string{engine.Postgres: ddl, engine.MySQL: ddl}}}}
}

// RowQueries implements workload.RowLister.
func (w *Workload) RowQueries() map[string]string {
	return map[string]string{"list_append": "SELECT k, v FROM list_append"}
}

// TotalRows implements workload.Workload: nothing is loaded (every list
// starts empty).
func (w *Workload) TotalRows() int64 { return 0 }

// Load implements workload.Workload.
func (w *Workload) Load(ctx context.Context, l workload.Loader, progress func(int64)) error {
	progress(0)
	return nil
}

// Transactions implements workload.Workload: "txn" (reads and appends,
// at least one append) at the source and "read" (reads only) where
// reads_at says. Each measurement starts on keys of its own.
func (w *Workload) Transactions() []workload.TxType {
	w.gen.Fresh()
	return w.cfg.Types(func(name string, write bool, at string) workload.TxType {
		return workload.TxType{Name: name, Statements: statements[w.cfg.Dialect], Session: w.cfg.Session(),
			Run: func(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
				return w.run(ctx, tx, r, write)
			}}
	})
}

// run draws a transaction and runs it: each read a SELECT, each append an
// upsert; the recorder gets the plan first and each list as it is read.
func (w *Workload) run(ctx context.Context, tx *workload.Tx, r *rand.Rand, write bool) (int64, error) {
	plan, err := w.gen.Txn(tx.User, r, write, history.FnAppend, w.users[tx.User].plan)
	if err != nil {
		return 0, err
	}
	u := &w.users[tx.User]
	u.plan, u.elems = plan, u.elems[:0]
	tx.Rec.Record(plan)
	var appended int64
	for i := range plan {
		m := &plan[i]
		if m.Fn == history.FnAppend {
			v := strconv.FormatInt(m.Value, 10)
			args := []any{m.Key, v}
			if w.cfg.Dialect == engine.MySQL {
				args = append(args, v)
			}
			if _, err := tx.Exec(ctx, "append", args...); err != nil {
				return 0, fmt.Errorf("append %d to key %d: %w", m.Value, m.Key, err)
			}
			appended++
			continue
		}
		var s sql.NullString
		if err := tx.QueryRow(ctx, "read", m.Key).Scan(&s); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("read key %d: %w", m.Key, err)
		}
		if !tx.Rec.On() {
			continue // only the history needs the list
		}
		from := len(u.elems)
		if u.elems, err = parseList(u.elems, s.String); err != nil {
			return 0, fmt.Errorf("read key %d: %w", m.Key, err)
		}
		*m = history.ReadList(m.Key, u.elems[from:len(u.elems):len(u.elems)])
	}
	return appended, nil
}

// parseList appends the elements of a list read as text ("1,2,3"; ""
// for none) to dst.
func parseList(dst []int64, s string) ([]int64, error) {
	for s != "" {
		e, rest, _ := strings.Cut(s, ",")
		v, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return dst, fmt.Errorf("the list %q has an element that is not a number: %q", s, e)
		}
		dst = append(dst, v)
		s = rest
	}
	return dst, nil
}
