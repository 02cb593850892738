// Package dmlstream is the GoldenGate study's generic DML generator: a
// stream of inserts, updates and deletes on a few tables, grouped into
// source transactions of k operations each, to measure how fast a
// replication pipeline carries logical change records (LCRs).
package dmlstream

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"

	"replab/internal/engine"
	"replab/internal/workload"
)

// Factory registers the workload as kind "dml-stream".
var Factory = workload.Factory{Kind: "dml-stream", New: New}

// Option bounds.
const (
	MaxTables   = 64
	MaxRows     = 100_000_000
	MaxOpsPerTx = 10_000
	MaxRowBytes = 60_000
)

// Workload is dml-stream with its options resolved.
type Workload struct {
	tables   int
	rows     int64 // rows per table loaded first
	opsPerTx int
	weights  [3]int // insert, update, delete
	rowBytes int
	seed     uint64
	dialect  engine.Dialect
	// operations > 0: the measure phase runs this many operations
	// (rounded up to whole transactions), as the study's 1M, 3M, 6M.
	operations int64

	// next numbers inserted rows beyond the loaded ones, per table, so
	// that every insert has a fresh key whichever user makes it.
	next []atomic.Int64
}

// New reads the options: tables, rows, ops_per_tx, insert, update,
// delete (weights), row_bytes and operations.
func New(o *workload.Options) (workload.Workload, error) {
	w := &Workload{
		tables:     int(o.Int("tables", 3, 1, MaxTables)),
		rows:       o.Int("rows", 10_000, 0, MaxRows),
		opsPerTx:   int(o.Int("ops_per_tx", 10, 1, MaxOpsPerTx)),
		weights:    [3]int{int(o.Int("insert", 50, 0, 100)), int(o.Int("update", 40, 0, 100)), int(o.Int("delete", 10, 0, 100))},
		rowBytes:   int(o.Int("row_bytes", 100, 1, MaxRowBytes)),
		operations: o.Int("operations", 0, 0, 1e12),
		seed:       uint64(o.Seed),
		dialect:    o.Dialect,
	}
	if w.weights[0]+w.weights[1]+w.weights[2] == 0 {
		o.Errorf("insert", "insert, update and delete are all 0: give at least one a weight")
	}
	if w.rows == 0 && w.weights[0] == 0 {
		o.Errorf("rows", "with no rows loaded and no inserts, updates and deletes find nothing to change")
	}
	if _, ok := stmtSQL[o.Dialect]; !ok {
		return nil, workload.ErrNoDialect("dml-stream", o.Dialect)
	}
	w.next = make([]atomic.Int64, w.tables)
	for i := range w.next {
		w.next[i].Store(w.rows)
	}
	return w, nil
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return "dml-stream" }

// MeasureTransactions implements workload.Counted: operations in whole
// transactions of ops_per_tx.
func (w *Workload) MeasureTransactions() int64 {
	return (w.operations + int64(w.opsPerTx) - 1) / int64(w.opsPerTx)
}

func table(i int) string { return "dml_" + strconv.Itoa(i+1) }

// Schema implements workload.Workload: tables dml_1 … dml_N, each (id
// bigint primary key, grp, n, payload).
func (w *Workload) Schema() engine.Schema {
	var s engine.Schema
	for i := 0; i < w.tables; i++ {
		t := table(i)
		s.Tables = append(s.Tables, engine.Table{Name: t, Create: map[engine.Dialect]string{
			engine.Postgres: "CREATE TABLE " + t + " (id bigint PRIMARY KEY, grp int NOT NULL, n bigint NOT NULL, payload text NOT NULL)",
			engine.MySQL:    "CREATE TABLE " + t + " (id bigint PRIMARY KEY, grp int NOT NULL, n bigint NOT NULL, payload text NOT NULL)",
		}})
	}
	return s
}

// TotalRows implements workload.Workload.
func (w *Workload) TotalRows() int64 { return w.rows * int64(w.tables) }

// DataBytes implements workload.Sizer: the loaded rows, about 50 bytes of
// overhead each.
func (w *Workload) DataBytes() int64 { return w.TotalRows() * int64(w.rowBytes+50) }

// stmtSQL holds each table's statements per dialect, built by stmts.
var stmtSQL = map[engine.Dialect]struct{ insert, update, delete string }{
	engine.Postgres: {"INSERT INTO %s (id, grp, n, payload) VALUES ($1, $2, 0, $3)", "UPDATE %s SET n = n + 1, payload = $2 WHERE id = $1", "DELETE FROM %s WHERE id = $1"},
	engine.MySQL:    {"INSERT INTO %s (id, grp, n, payload) VALUES (?, ?, 0, ?)", "UPDATE %s SET n = n + 1, payload = ? WHERE id = ?", "DELETE FROM %s WHERE id = ?"},
}

// Transactions implements workload.Workload: one type, "dml", of
// ops_per_tx operations, each an insert, update or delete (by weight) on a
// table chosen at random.
func (w *Workload) Transactions() []workload.TxType {
	q := stmtSQL[w.dialect]
	var stmts []workload.Statement
	for i := 0; i < w.tables; i++ {
		t := table(i)
		stmts = append(stmts,
			workload.Statement{Name: "i" + strconv.Itoa(i), SQL: fmt.Sprintf(q.insert, t)},
			workload.Statement{Name: "u" + strconv.Itoa(i), SQL: fmt.Sprintf(q.update, t)},
			workload.Statement{Name: "d" + strconv.Itoa(i), SQL: fmt.Sprintf(q.delete, t)})
	}
	return []workload.TxType{{Name: "dml", Weight: 100, Statements: stmts, Run: w.run, Batch: w.batch}}
}

// op is one operation: its statement and arguments.
type op struct {
	stmt string
	args []any
}

// ops draws one transaction's operations from r.
func (w *Workload) ops(r *rand.Rand) []op {
	total := w.weights[0] + w.weights[1] + w.weights[2]
	out := make([]op, w.opsPerTx)
	for k := range out {
		t := r.IntN(w.tables)
		ts := strconv.Itoa(t)
		x := r.IntN(total)
		switch {
		case x < w.weights[0]:
			id := w.next[t].Add(1)
			out[k] = op{"i" + ts, []any{id, int(id % 100), w.payload(r)}}
		case x < w.weights[0]+w.weights[1]:
			id := w.existing(r, t)
			if w.dialect == engine.MySQL {
				out[k] = op{"u" + ts, []any{w.payload(r), id}}
			} else {
				out[k] = op{"u" + ts, []any{id, w.payload(r)}}
			}
		default:
			out[k] = op{"d" + ts, []any{w.existing(r, t)}}
		}
	}
	return out
}

// existing is an id that was loaded or inserted (it may have been deleted
// since: the statement then changes nothing, and the stream has one change
// fewer, as a delete of a missing row has in the study's generator).
func (w *Workload) existing(r *rand.Rand, t int) int64 {
	return 1 + r.Int64N(max(w.next[t].Load(), 1))
}

const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "

// payload is row_bytes of random text.
func (w *Workload) payload(r *rand.Rand) string {
	b := make([]byte, w.rowBytes)
	for i := 0; i < len(b); i += 10 {
		u := r.Uint64()
		for j := i; j < min(i+10, len(b)); j++ {
			b[j] = letters[u%uint64(len(letters))]
			u /= uint64(len(letters))
		}
	}
	return string(b)
}

func (w *Workload) run(ctx context.Context, tx *workload.Tx, r *rand.Rand) (int64, error) {
	var rows int64
	for _, o := range w.ops(r) {
		res, err := tx.Exec(ctx, o.stmt, o.args...)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", o.stmt, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return rows, err
		}
		rows += n
	}
	return rows, nil
}

// batch is run as one pipelined call.
func (w *Workload) batch(_ int, r *rand.Rand, _ *workload.Scratch) []workload.Call {
	ops := w.ops(r)
	calls := make([]workload.Call, len(ops))
	for i, o := range ops {
		rows := int64(-1) // an update or delete may find its row deleted
		if o.stmt[0] == 'i' {
			rows = 1
		}
		calls[i] = workload.Call{Stmt: o.stmt, Args: o.args, Rows: rows}
	}
	return calls
}

// Load implements workload.Workload: rows 1 … rows of every table.
func (w *Workload) Load(ctx context.Context, l workload.Loader, progress func(rows int64)) error {
	r := rand.New(rand.NewPCG(w.seed, 0x646d6c2d6c6f6164)) // "dml-load"
	var done int64
	for t := 0; t < w.tables; t++ {
		src := &loadSource{w: w, r: r, ctx: ctx, last: w.rows, progress: func(n int64) {
			if progress != nil {
				progress(done + n)
			}
		}}
		n, err := l.Copy(ctx, table(t), []string{"id", "grp", "n", "payload"}, src)
		if err == nil {
			err = src.err
		}
		if err != nil {
			return fmt.Errorf("load %s: %w", table(t), err)
		}
		if n != w.rows {
			return fmt.Errorf("load %s: %d rows stored of %d", table(t), n, w.rows)
		}
		done += n
	}
	if progress != nil {
		progress(done)
	}
	for t := 0; t < w.tables; t++ {
		analyze := "ANALYZE " + table(t)
		if w.dialect == engine.MySQL {
			analyze = "ANALYZE TABLE " + table(t)
		}
		if err := l.Exec(ctx, analyze); err != nil {
			return err
		}
	}
	return nil
}

// loadSource yields rows 1 … last of one table.
type loadSource struct {
	w        *Workload
	r        *rand.Rand
	ctx      context.Context
	i, last  int64
	row      []any
	err      error
	progress func(int64)
}

// Next implements workload.RowSource.
func (s *loadSource) Next() bool {
	if s.i >= s.last || s.err != nil {
		return false
	}
	if s.i%1000 == 0 {
		if s.err = s.ctx.Err(); s.err != nil {
			return false
		}
		if s.i > 0 && s.i%5000 == 0 {
			s.progress(s.i)
		}
	}
	s.i++
	s.row = []any{s.i, int(s.i % 100), int64(0), s.w.payload(s.r)}
	return true
}

// Values implements workload.RowSource.
func (s *loadSource) Values() ([]any, error) { return s.row, nil }

// Err implements workload.RowSource.
func (s *loadSource) Err() error { return s.err }
