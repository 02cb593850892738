// Package workload defines what a workload is: its schema, its initial
// data (deterministic from a seed, loaded through the engine's fastest
// path) and its transaction types with weights. Workloads live in
// subpackages and are collected in a Registry; the driver, the lag probe
// and the reports stay generic.
package workload

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"replab/internal/engine"
	"replab/internal/spec"
)

// Workload is one kind of load.
type Workload interface {
	Name() string
	// Schema is created by the engine wherever the scheme needs it.
	Schema() engine.Schema
	// TotalRows is how many rows Load inserts (for progress and ETA).
	TotalRows() int64
	// Load inserts the initial data. It calls progress with the rows
	// inserted so far, at least every few thousand rows.
	Load(ctx context.Context, l Loader, progress func(rows int64)) error
	// Transactions are the transaction types, chosen by weight.
	Transactions() []TxType
}

// Loader is the engine's bulk path (COPY for PostgreSQL).
type Loader interface {
	// Copy inserts rows into table's columns.
	Copy(ctx context.Context, table string, columns []string, rows RowSource) (int64, error)
	// Exec runs one statement (e.g. ANALYZE after loading).
	Exec(ctx context.Context, sql string) error
}

// RowSource yields rows for Copy (the shape of pgx.CopyFromSource).
type RowSource interface {
	Next() bool
	Values() ([]any, error)
	Err() error
}

// TxType is one transaction type.
type TxType struct {
	Name   string
	Weight int
	// Statements are prepared once per user connection, in the order
	// Run refers to them (Tx.Exec(ctx, i, …)).
	Statements []string
	// Run executes the transaction's statements inside tx and returns
	// how many rows it changed. r is the user's own deterministic source.
	Run func(ctx context.Context, tx *Tx, r *rand.Rand) (int64, error)
	// Batch, when set, describes the same transaction as statements that
	// do not depend on each other's results, drawing from r exactly as Run
	// does. The driver can then send BEGIN, them and COMMIT in one round
	// trip (pipelined) where the engine's connection allows it.
	Batch func(r *rand.Rand) []Call
}

// Call is one statement of a batched transaction.
type Call struct {
	Stmt int   // index into TxType.Statements
	Args []any // its arguments
	// Rows is how many rows it must change; -1 means any. In a pipelined
	// transaction the COMMIT is already sent when a count comes back
	// wrong: the driver then counts an error for a committed transaction.
	Rows int64
}

// Tx is a transaction with the user's prepared statements.
type Tx struct {
	Tx    *sql.Tx
	Stmts []*sql.Stmt
}

// Exec runs prepared statement i inside the transaction.
func (t *Tx) Exec(ctx context.Context, i int, args ...any) (sql.Result, error) {
	return t.Tx.StmtContext(ctx, t.Stmts[i]).ExecContext(ctx, args...)
}

// QueryRow runs prepared statement i inside the transaction.
func (t *Tx) QueryRow(ctx context.Context, i int, args ...any) *sql.Row {
	return t.Tx.StmtContext(ctx, t.Stmts[i]).QueryRowContext(ctx, args...)
}

// Factory builds a workload from its options.
type Factory struct {
	Kind string
	New  func(o *Options) (Workload, error)
}

// Registry holds the workloads a replab binary knows.
type Registry struct {
	byKind map[string]Factory
}

// NewRegistry collects workload factories.
func NewRegistry(fs ...Factory) *Registry {
	r := &Registry{byKind: map[string]Factory{}}
	for _, f := range fs {
		r.byKind[f.Kind] = f
	}
	return r
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	var k []string
	for n := range r.byKind {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// For builds the workload a spec asks for, in the given SQL dialect;
// nil when the spec has none. Option errors point at file:line.
func (r *Registry) For(s *spec.Spec, dialect string) (Workload, error) {
	if s.Workload == nil {
		return nil, nil
	}
	f, ok := r.byKind[s.Workload.Kind]
	if !ok {
		return nil, s.Errorf("workload.kind", "unknown workload %q; workloads: %s", s.Workload.Kind, strings.Join(r.Kinds(), ", "))
	}
	o := &Options{Spec: s, Dialect: dialect, Seed: s.Run.Seed, errs: engine.NewErrors(s), used: map[string]bool{}}
	w, err := f.New(o)
	if err == nil {
		err = o.Err()
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Options are a workload's [workload] keys, with typed accessors that
// record errors pointing at the spec's file:line.
type Options struct {
	Spec    *spec.Spec
	Dialect string // "postgres" or "mysql"
	Seed    int64
	errs    *engine.Errors
	used    map[string]bool
}

func (o *Options) raw(key string) (any, bool) {
	o.used[key] = true
	if o.Spec == nil || o.Spec.Workload == nil {
		return nil, false
	}
	v, ok := o.Spec.Workload.Options[key]
	return v, ok
}

// Int reads an integer option in [lo, hi], or def when absent.
func (o *Options) Int(key string, def, lo, hi int64) int64 {
	v, ok := o.raw(key)
	if !ok {
		return def
	}
	n, isInt := v.(int64)
	if !isInt || n < lo || n > hi {
		o.errs.Add("workload."+key, "want a whole number from %d to %d", lo, hi)
		return def
	}
	return n
}

// String reads a string option, one of allowed when given, or def.
func (o *Options) String(key, def string, allowed ...string) string {
	v, ok := o.raw(key)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr || (len(allowed) > 0 && !slices.Contains(allowed, s)) {
		if len(allowed) > 0 {
			o.errs.Add("workload."+key, "want one of %s", strings.Join(allowed, ", "))
		} else {
			o.errs.Add("workload."+key, "want a string")
		}
		return def
	}
	return s
}

// Errorf records an error about an option.
func (o *Options) Errorf(key, format string, args ...any) {
	o.errs.Add("workload."+key, format, args...)
}

// Err reports every option error, and options the workload does not know.
func (o *Options) Err() error {
	if o.Spec != nil && o.Spec.Workload != nil {
		var known []string
		for k := range o.used {
			known = append(known, k)
		}
		sort.Strings(known)
		for k := range o.Spec.Workload.Options {
			if !o.used[k] {
				o.errs.Add("workload."+k, "unknown option for workload %s; options: %s", o.Spec.Workload.Kind, strings.Join(known, ", "))
			}
		}
	}
	return o.errs.Err()
}

// Pick chooses a transaction type by weight.
func Pick(types []TxType, r *rand.Rand) int {
	total := 0
	for _, t := range types {
		total += t.Weight
	}
	if total <= 0 {
		return 0
	}
	n := r.IntN(total)
	for i, t := range types {
		if n < t.Weight {
			return i
		}
		n -= t.Weight
	}
	return len(types) - 1
}

// ErrNoDialect is returned by workloads asked for a dialect they lack.
func ErrNoDialect(workload, dialect string) error {
	return fmt.Errorf("workload %s has no %s schema", workload, dialect)
}
