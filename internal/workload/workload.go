// Package workload defines what a workload is: its schema, its initial
// data (deterministic from a seed, loaded through the engine's fastest
// path) and its transaction types with weights, each saying where it runs
// and whether it writes. Workloads live in subpackages and are collected
// in a Registry; the driver, the lag probe and the reports stay generic.
package workload

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"time"

	"replab/internal/engine"
	"replab/internal/pagestats"
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

// Sizer is a workload that can say roughly how many bytes its initial data
// takes (to estimate how long copying it across a link would take).
type Sizer interface {
	DataBytes() int64
}

// Counted is a workload that asks for a count of transactions in the
// measure phase instead of a duration (dml-stream's operations); [run]
// transactions, when written, wins.
type Counted interface {
	MeasureTransactions() int64 // 0: none asked for
}

// Loader is the engine's bulk path (COPY for PostgreSQL, multi-row
// INSERTs without one: see enginekit.InsertLoader).
type Loader = engine.Loader

// RowSource yields rows for Loader.Copy.
type RowSource = engine.RowSource

// Where a transaction type runs (TxType.At).
const (
	// AtSource is the user's source: the primary, or the master the user
	// writes at (user i uses source i mod n). The default.
	AtSource = ""
	// AtReplica is a replica: the one in the users' own site if there is
	// one, else replica i mod n for user i. Only read-only types.
	AtReplica = "replica"
)

// AtSite is the node in the named site (a replica there, if there are
// several nodes).
func AtSite(site string) string { return "site:" + site }

// TxType is one transaction type.
type TxType struct {
	Name   string
	Weight int
	// At says where it runs: AtSource (default), AtReplica, AtSite(name).
	At string
	// ReadOnly types change nothing: they carry no lag stamp, and may run
	// at a replica.
	ReadOnly bool
	// Statements are prepared once per user connection; Run addresses
	// them by name.
	Statements []Statement
	// Session statements run once on each connection the type's
	// transactions use, when the user connects and again after it
	// reconnects (SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION
	// LEVEL SERIALIZABLE, SET SESSION wsrep_sync_wait = 1): a setting
	// of every transaction on the connection, at no cost per transaction.
	// Types that share a connection (the same place) should agree.
	Session []string
	// Run executes the transaction's statements inside tx and returns
	// how many rows it changed. r is the user's own deterministic source.
	Run func(ctx context.Context, tx *Tx, r *rand.Rand) (int64, error)
	// Autocommit, for a ReadOnly type, runs its statements without BEGIN
	// and COMMIT, each its own transaction (as pgbench runs a script
	// without BEGIN): one statement where a transaction would send three.
	// It is pipelined where the engine's pipe can send statements without
	// a transaction (engine.AutocommitPipe). Ignored for a type that writes.
	Autocommit bool
	// Batch, when set, describes the same transaction as statements that
	// do not depend on each other's results, drawing from r exactly as Run
	// does. The driver can then send BEGIN, them and COMMIT in one round
	// trip (pipelined) where the engine's connection allows it. s is the
	// user's Scratch for this type (nil from a caller without one).
	Batch func(user int, r *rand.Rand, s *Scratch) []Call
	// Op, when set, is an operation that is not SQL (a page read from a
	// page server, a put into a key-value store): the workload holds its
	// own connections (Connector), the driver times and counts each call
	// as one transaction, and Statements, Run and Batch are unused. It
	// returns what it moved (rows, pages).
	Op func(ctx context.Context, call OpCall, r *rand.Rand) (int64, error)

	// ReadDelay, for a ReadOnly type, holds each of its transactions
	// until this long after its user's last acknowledged writing
	// transaction (the pause an application takes before it trusts a
	// replica with its own write: Rails' 2 s). The transaction begins
	// after the pause; a user whose last write is older does not pause.
	ReadDelay time.Duration
	// WaitOwnWrites, for a ReadOnly type at a replica, makes each of its
	// transactions first wait until its node has applied the user's last
	// acknowledged write (the engine's engine.ReadFence: a commit position
	// taken after the write, waited for before the read). The wait is part
	// of the read's latency.
	WaitOwnWrites bool
}

// OpCall is one call of an Op: whose it is and, for an Op that writes,
// the lag probe's stamp to carry in its commit.
type OpCall struct {
	User int
	// Rec records the call's micro-operations for the history; nil when
	// the run records none (its methods are no-ops on nil).
	Rec *Recorder
	// Seq is the user's lag stamp when the driver tracks this call (0
	// when it does not): the Op commits it with its change, as the
	// cluster's engine.LagStamps read it back at the replicas, and calls
	// Sending just before the commit leaves.
	Seq     int64
	Sending func()
}

// RowLister is a workload whose rows can be compared node by node after a
// run (how many rows a multi-master scheme left diverged): per table, a
// query returning each row's key and its content, in columns that scan
// as text, in every dialect.
type RowLister interface {
	RowQueries() map[string]string
}

// Connector is a workload whose operations are not SQL (TxType.Op): it
// makes its own connections before the driver starts and closes them
// after, once per measurement.
type Connector interface {
	Connect(ctx context.Context, env ConnectEnv) error
	Close() error
}

// ConnectEnv is what a Connector connects to and from.
type ConnectEnv struct {
	Cluster engine.Cluster
	Nodes   []engine.Node
	// Dial makes a connection from the client's site, across the links a
	// client there would use.
	Dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	Users int
	// SiteDo runs f inside a site's network namespace (to watch a
	// server's sockets from its side); nil when sites are not namespaces.
	SiteDo func(site string, f func() error) error
	// Journal, with verification on, journals the puts of clients made
	// with KVClient (nil: verification off, or an SQL cluster).
	Acks *OpAcks
}

// PageReporter is a workload that reads pages: after a measurement it
// writes pages.csv into dir and returns its figures over the measure phase
// [from, to) for summary.json.
type PageReporter interface {
	PageReport(dir string, from, to time.Time) (*pagestats.Summary, error)
}

// OpsOnly says whether every type is an Op: the driver then opens no SQL
// connection.
func OpsOnly(types []TxType) bool {
	for _, t := range types {
		if t.Op == nil {
			return false
		}
	}
	return len(types) > 0
}

// Statement is a named SQL statement of a transaction type.
type Statement struct {
	Name string
	SQL  string
}

// Call is one statement of a batched transaction.
type Call struct {
	Stmt string // a Statement's name
	// Args are values database/sql accepts; a pointer is sent as what it
	// points to (nil as NULL), so a batch in a Scratch can point at its
	// values there instead of boxing new ones each time.
	Args []any
	// Rows is how many rows it must change; -1 means any. In a pipelined
	// transaction the COMMIT is already sent when a count comes back
	// wrong: the driver then counts an error for a committed transaction.
	Rows int64
	// Err, when set, fails the transaction before anything is sent (a
	// script's division by zero while computing its arguments): the
	// driver counts it as an error of the type.
	Err error
}

// Scratch is one user's memory for the batches of one transaction type,
// kept by the driver from one transaction to the next. A Batch may build
// its calls and their arguments in it (State is the workload's own, made
// on its first call) and overwrite them on the user's next Batch: by then
// the driver has sent the previous batch (a pipe copies the arguments
// into its request before Run returns) and holds nothing of it. Building
// a transaction then allocates nothing, which is a tenth of the driver's
// CPU per pipelined transaction when the server is near (allocation and
// the garbage collector's share of it, in a profile of replab run).
type Scratch struct {
	State any
	// Rec records the batch's micro-operations for the history (the
	// driver sets it before each Batch); nil when the run records none.
	Rec *Recorder
}

// StateOf is s's State as a *T, made on the first call (and set up by
// init, when given); a nil s gives a new one each time.
func StateOf[T any](s *Scratch, init func(*T)) *T {
	if s != nil {
		if t, ok := s.State.(*T); ok {
			return t
		}
	}
	t := new(T)
	if init != nil {
		init(t)
	}
	if s != nil {
		s.State = t
	}
	return t
}

// Tx is one attempt of a transaction, with the user's prepared statements.
type Tx struct {
	// User is the number of the user running it (0 … users-1).
	User int
	// Rec records the attempt's micro-operations for the history; nil
	// when the run records none (its methods are no-ops on nil).
	Rec   *Recorder
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

// NewTx binds a database/sql transaction to a user's prepared statements,
// by name. The driver makes one per attempt; tx is nil for an Autocommit
// type (each statement commits on its own).
func NewTx(user int, tx *sql.Tx, stmts map[string]*sql.Stmt) *Tx {
	return &Tx{User: user, tx: tx, stmts: stmts}
}

// in is st inside the transaction, or st itself (on its connection) for
// an Autocommit type.
func (t *Tx) in(ctx context.Context, st *sql.Stmt) *sql.Stmt {
	if t.tx == nil {
		return st
	}
	return t.tx.StmtContext(ctx, st)
}

func (t *Tx) stmt(name string) (*sql.Stmt, error) {
	st, ok := t.stmts[name]
	if !ok {
		return nil, fmt.Errorf("no statement %q in this transaction type", name)
	}
	return st, nil
}

// Exec runs the named statement inside the transaction.
func (t *Tx) Exec(ctx context.Context, name string, args ...any) (sql.Result, error) {
	st, err := t.stmt(name)
	if err != nil {
		return nil, err
	}
	return t.in(ctx, st).ExecContext(ctx, args...)
}

// QueryRow runs the named statement inside the transaction for one row.
func (t *Tx) QueryRow(ctx context.Context, name string, args ...any) *Row {
	st, err := t.stmt(name)
	if err != nil {
		return &Row{err: err}
	}
	return &Row{row: t.in(ctx, st).QueryRowContext(ctx, args...)}
}

// Row is the result of QueryRow (sql.Row, or the error of naming a
// statement the type does not have).
type Row struct {
	row *sql.Row
	err error
}

// Scan copies the row's columns into dest; sql.ErrNoRows when there is none.
func (r *Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.row.Scan(dest...)
}

// Query runs the named statement inside the transaction for many rows.
// Close the rows.
func (t *Tx) Query(ctx context.Context, name string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(name)
	if err != nil {
		return nil, err
	}
	return t.in(ctx, st).QueryContext(ctx, args...)
}

// Options are a workload's [workload] keys (spec.Options: typed
// accessors with file:line errors), its SQL dialect and the run's seed.
type Options struct {
	*spec.Options
	Spec    *spec.Spec
	Dialect engine.Dialect // engine.Postgres, engine.MySQL, or engine.KV for a key-value store
	Seed    int64
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

// NewRegistry collects workload factories. Two of one kind are a
// programming error: it panics, naming the kind.
func NewRegistry(fs ...Factory) *Registry {
	r := &Registry{byKind: map[string]Factory{}}
	for _, f := range fs {
		if err := r.Register(f); err != nil {
			panic(err)
		}
	}
	return r
}

// Register adds a factory; it refuses a kind that is taken.
func (r *Registry) Register(f Factory) error {
	if _, dup := r.byKind[f.Kind]; dup {
		return fmt.Errorf("workload kind %q registered twice", f.Kind)
	}
	r.byKind[f.Kind] = f
	return nil
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
func (r *Registry) For(s *spec.Spec, dialect engine.Dialect) (Workload, error) {
	if s.Workload == nil {
		return nil, nil
	}
	f, ok := r.byKind[s.Workload.Kind]
	if !ok {
		return nil, s.Errorf("workload.kind", "unknown workload %q; workloads: %s", s.Workload.Kind, strings.Join(r.Kinds(), ", "))
	}
	o := &Options{Options: s.WorkloadOptions("workload " + s.Workload.Kind), Spec: s, Dialect: dialect, Seed: s.Run.Seed}
	w, err := f.New(o)
	if oerr := o.Err(); oerr != nil {
		return nil, oerr // the options' errors explain a failed New too
	}
	if err != nil {
		return nil, s.Errorf("workload.kind", "%v", err)
	}
	return w, nil
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
func ErrNoDialect(workload string, dialect engine.Dialect) error {
	if dialect == "" || dialect == engine.KV {
		return fmt.Errorf("workload %s runs SQL, and this engine has no SQL", workload)
	}
	return fmt.Errorf("workload %s has no %s schema", workload, dialect)
}
