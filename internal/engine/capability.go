package engine

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"time"

	"replab/internal/lab"
	"replab/internal/spec"
)

// The capabilities. A Cluster implements those its system has; callers
// find them by type assertion (c.(engine.SQL)) and say clearly what is
// missing when a spec needs one the engine lacks.

// SQL is a cluster that clients reach with SQL through database/sql.
type SQL interface {
	// Dialect is the SQL flavour workloads write for it: Postgres or
	// MySQL.
	Dialect() Dialect
	// Open returns a connection pool to node whose connections are made
	// from fromSite, so their traffic crosses the links a client there
	// would use.
	Open(ctx context.Context, node, fromSite string) (*sql.DB, error)
	// ApplySchema creates tables wherever the scheme needs them (at the
	// primary, at every master, at logical replicas) and adds them to
	// replication. It may be called again with more tables.
	ApplySchema(ctx context.Context, s Schema) error
}

// Schema is what a workload needs created.
type Schema struct {
	Tables []Table
}

// Table is one table. Create holds its CREATE TABLE statement per SQL
// dialect (Postgres, MySQL); every table needs a primary key, which
// logical and multi-master replication use to match rows.
type Table struct {
	Name   string
	Create map[Dialect]string
	// Indexes are extra CREATE INDEX statements per dialect.
	Indexes map[Dialect][]string
	// Everywhere replicates the table, whole, to every replica, whatever
	// its filters: replab's own bookkeeping (the lag probe's table).
	Everywhere bool
}

// BulkLoader is an SQL cluster's fast path for initial data (PostgreSQL:
// COPY). Without it data goes in as multi-row INSERTs.
type BulkLoader interface {
	// Loader connects to node from fromSite. Close it after loading.
	Loader(ctx context.Context, node, fromSite string) (Loader, error)
}

// Loader inserts a workload's initial data.
type Loader interface {
	// Copy inserts rows into table's columns, as one statement committed
	// on its own.
	Copy(ctx context.Context, table string, columns []string, rows RowSource) (int64, error)
	// Exec runs one statement (e.g. ANALYZE after loading).
	Exec(ctx context.Context, sql string) error
	Close() error
}

// RowSource yields rows for Copy. Next is called until it returns false;
// Values then returns the current row.
type RowSource interface {
	Next() bool
	Values() ([]any, error)
	Err() error
}

// Pipeliner sends a whole SQL transaction in one round trip, as a client
// that pipelines would, over connections of the cluster's pools.
type Pipeliner interface {
	// Pipe takes a connection out of db (one of Open's pools) for
	// pipelined transactions of stmts, prepared once, there. It fails
	// with ErrNoPipeline, db unchanged, when db's connections cannot
	// pipeline.
	Pipe(ctx context.Context, db *sql.DB, stmts []string) (Pipe, error)
}

// Pipe is one connection's pipelined transactions; one goroutine uses it.
type Pipe interface {
	// Run sends BEGIN, calls and COMMIT in one write; beforeSend is
	// called just before they leave (the moment the COMMIT is sent). It
	// sets rows[i] to call i's rows affected (rows has len(calls)). A
	// statement's error comes back as the engine's error (its
	// ErrorClassifier knows it), the transaction rolled back. An error
	// that leaves the connection unusable (cancellation while the reply
	// is due, a broken connection) closes it: later runs fail.
	Run(ctx context.Context, calls []PipeCall, beforeSend func(), rows []int64) error
	// Close closes the connection.
	Close() error
}

// AutocommitPipe is a Pipe that can also send statements outside any
// transaction, each its own (as pgbench sends a script without BEGIN): the
// statements and a sync after each leave in one write, and their results
// come back together.
type AutocommitPipe interface {
	// RunAutocommit is Run without BEGIN and COMMIT: every call commits on
	// its own, and an error of one does not undo the others.
	RunAutocommit(ctx context.Context, calls []PipeCall, beforeSend func(), rows []int64) error
}

// PipeCall is one statement of a pipelined transaction: the index of one
// of the Pipe's stmts, and its arguments.
type PipeCall struct {
	Stmt int
	Args []any
}

// ErrNoPipeline says a connection cannot pipeline: send statement by
// statement.
var ErrNoPipeline = errors.New("connection cannot pipeline")

// LagStamps is a cluster's own way to carry the lag probe's stamps: every
// tracked transaction sets its writer's sequence number, and a reader at
// a replica sees the numbers that arrived. SQL clusters need not bring
// one: the replab_lag table (package lagprobe) is the SQL implementation,
// and a key-value store or a pipeline brings its own.
type LagStamps interface {
	// ResetLag sets writers 0..writers-1 to sequence 0 at the sources;
	// WaitFlowing then carries the reset to every replica.
	ResetLag(ctx context.Context, writers int) error
	LagReaders
}

// LagReaders opens readers of the stamps visible at a replica. An SQL
// cluster may offer it alone: a reader faster than database/sql's.
type LagReaders interface {
	// LagReader connects to node from its own site (a poll must not cross
	// a WAN link).
	LagReader(ctx context.Context, node string) (LagReader, error)
}

// LagReader reads the stamps at one replica; one goroutine uses it.
type LagReader interface {
	// Positions sets dst[w] to the sequence of writer w visible now;
	// writers it does not find are left alone.
	Positions(ctx context.Context, dst []int64) error
	Close() error
}

// Positions is a cluster whose replicas apply its sources' commits in the
// order of a position the source gives each commit — PostgreSQL's WAL LSN,
// the sequence number of a MariaDB GTID in its domain, Galera's seqno —, so
// that a commit is visible at such a replica once the position the replica
// has applied is at or past the commit's. The lag probe's position method
// rests on it: every transaction timed, for one poll per replica and
// interval whatever the load, where stamps cost a statement and about ten
// polls per tracked transaction. Clients learn their commits' positions
// without a round trip of their own, in the way CommitPositions says.
type Positions interface {
	// PositionMethod says what node's applied position is, in a few words
	// ("WAL replay LSN"), or "" when node's lag cannot be read from
	// positions: it applies changes in an order of its own or only some of
	// them (a logical or partial replica, a snapshot), or its sources
	// number their commits apart.
	PositionMethod(node string) string
	// PositionReader connects to node from its own site (a poll must not
	// cross a WAN link).
	PositionReader(ctx context.Context, node string) (PositionReader, error)
	// CommitPositions says which commits learn their position: PipeCommits
	// (pipelined transactions, PositionPipe), SessionCommits (every commit
	// on a connection of Open's pools, SessionPositions), PutCommits (a
	// KVClient's puts, KVCommit.Position).
	CommitPositions() CommitPositions
}

// CommitPositions are the commits whose position a client learns.
type CommitPositions int

// The ways clients learn their commits' positions.
const (
	PipeCommits CommitPositions = iota + 1
	SessionCommits
	PutCommits
)

// PositionReader reads one replica's applied position; one goroutine uses
// it.
type PositionReader interface {
	// Applied is the position up to which node has applied its sources'
	// commits and shows them to readers.
	Applied(ctx context.Context) (int64, error)
	Close() error
}

// PositionPipe is a Pipe that learns a transaction's commit position in
// the same round trip as its commit.
type PositionPipe interface {
	// RunPositioned is Run, and returns for a transaction that committed a
	// position at or past its commit's: the transaction is visible at a
	// replica that has applied it (0 when the server did not say).
	RunPositioned(ctx context.Context, calls []PipeCall, beforeSend func(), rows []int64) (int64, error)
}

// SessionPositions is a cluster whose servers tell each commit's position
// in the commit's own reply (MariaDB's session tracking).
type SessionPositions interface {
	// CommitPositionsOf sets conn, a connection of one of Open's pools, up to
	// receive them, and returns what reads the position of the latest
	// commit on conn (0 when none is known). One goroutine uses conn and
	// the function.
	CommitPositionsOf(ctx context.Context, conn *sql.Conn) (func() int64, error)
}

// NodeControl stops, starts, kills and restarts nodes: what faults do to
// servers.
type NodeControl interface {
	// Stop shuts node down cleanly and waits until it is down.
	Stop(ctx context.Context, node string) error
	// Start starts a stopped or killed node again and waits until it
	// accepts connections.
	Start(ctx context.Context, node string) error
	// Kill sends SIGKILL to every process of node and waits until they
	// are gone: a crash, with no chance to flush or say goodbye.
	Kill(ctx context.Context, node string) error
	// Restart is Stop then Start.
	Restart(ctx context.Context, node string) error
}

// Pauser freezes and thaws nodes (SIGSTOP, SIGCONT): a server that hangs
// with its connections open, as a stalled disk or a swapping host would.
type Pauser interface {
	Pause(ctx context.Context, node string) error
	Resume(ctx context.Context, node string) error
}

// StageControl acts on a node's replication stages: processes of their
// own that are not the server (the PostgreSQL pipeline scheme's extract,
// pump, collector and replicats), for faults.
type StageControl interface {
	// Stages lists the stages node has ("" and nil: none), in the order
	// a change passes them.
	Stages(node string) []string
	// DoStage does kill, stop, start, restart, pause or resume to every
	// process of the stage (a replica's several replicats together).
	DoStage(ctx context.Context, node, stage, do string) error
}

// ErrFailedOver is a node's Start refused because a standby of it was
// promoted: started, it would be a second primary.
var ErrFailedOver = errors.New("failed over from")

// Promoter promotes a standby to primary: failover. The old primary is
// out of the cluster afterwards (Nodes no longer lists it as writable).
type Promoter interface {
	Promote(ctx context.Context, node string) error
}

// PageServer is a cluster that serves files read page by page (XRootD),
// not SQL: the page-read workload reads what it lists over the server's
// protocol.
type PageServer interface {
	Files() []ServedFile
}

// ServedFile is one file a node exports; its content derives from Seed
// and Index (package pagedata), so a reader can check every page.
type ServedFile struct {
	Node  string
	Path  string // as clients name it
	Index int
	Size  int64
	Seed  int64
}

// Refresher is a cluster whose replicas are snapshots refreshed at an
// interval.
type Refresher interface {
	// Refresh brings every snapshot replica up to date now.
	Refresh(ctx context.Context) error
	// RefreshInterval is how often they refresh by themselves.
	RefreshInterval() time.Duration
}

// Checksummer is a cluster that can tell whether its copies agree. After a
// run the runner compares the checksums of the workload's tables: a
// multi-master scheme that leaves conflicting updates unresolved (MariaDB
// two-way replication) must show its divergence, not hide it.
type Checksummer interface {
	// Checksums returns, per node, a checksum per table, for every node
	// that should hold the same rows as every other one returned (nodes
	// with partial copies are left out). Equal data gives equal sums.
	Checksums(ctx context.Context, tables ...string) (map[string]map[string]int64, error)
}

// ConflictCounter is a multi-master cluster whose replication detects
// conflicts by itself — two masters changing the same row before either
// saw the other's change — and counts them. The runner reads the counts
// when the measure phase begins and again after the run has caught up
// (conflicts of a partition are found when it heals).
type ConflictCounter interface {
	// ConflictsCounted says what is counted, in a few words; "" when the
	// cluster's scheme detects no conflicts (one writer, or two-way
	// replication that overwrites silently: see Checksummer).
	ConflictsCounted() string
	// ReplicationConflicts returns what each running node has counted so
	// far. A node's count may start again from 0 when it restarts.
	ReplicationConflicts(ctx context.Context) (map[string]int64, error)
}

// Gauger is a cluster with figures of its own worth sampling beside its
// replication state (a JVM's heap and time in garbage collection): the
// monitors write them to gauges.csv and summarise the measure phase.
type Gauger interface {
	Gauges(ctx context.Context) ([]Gauge, error)
}

// Gauge is one figure of one node. Name carries its unit
// ("heap_used_bytes", "gc_time_ms").
type Gauge struct {
	Node  string
	Name  string
	Value float64
	// Counter: a total that only grows while the node runs; its summary
	// is its increase over the measure phase, not only its maximum.
	Counter bool
}

// SyncFallbacker is a cluster whose synchronous replication falls back to
// asynchronous by itself when no replica acknowledges in time, and back
// when one catches up (MariaDB's semi-sync after its timeout). The runner
// reports the periods that fell in the measure phase.
type SyncFallbacker interface {
	// SyncFallbacks lists the periods each node that can fall back ran
	// asynchronously so far (End zero: still going on), as the engine saw
	// them at its polling resolution; ok is false when the cluster's scheme
	// has nothing that can fall back.
	SyncFallbacks() (periods []FallbackPeriod, resolution time.Duration, ok bool)
}

// FallbackPeriod is one period a node committed without waiting for a
// replica's acknowledgement.
type FallbackPeriod struct {
	Node       string
	Start, End time.Time
}

// RoleWatcher is a cluster whose primary can change by itself (an HA
// manager fails over, demotes a primary it fenced, rejoins an old one as
// a standby): it follows every node's role as it polls, and keeps the
// history for the run's measures and its charts.
type RoleWatcher interface {
	// RoleHistory returns every period a node held a role, as its server
	// said (Source RoleFromServer) and as its manager said
	// (RoleFromManager), each node's oldest first; a period whose End is
	// zero goes on. resolution is the polling interval.
	RoleHistory() (periods []RolePeriod, resolution time.Duration)
}

// RolePeriod is one period a node held one role.
type RolePeriod struct {
	Node       string
	Source     string // RoleFromServer or RoleFromManager
	Role       string // RolePrimary, RoleStreaming, RoleReplica or RoleDown
	Start, End time.Time
}

// Roles a node can hold, and who said it.
const (
	RolePrimary   = "primary"   // takes writes (the server is not in recovery; the manager holds the leader key)
	RoleStreaming = "streaming" // a standby streaming from a primary
	RoleReplica   = "replica"   // a standby not streaming: catching up, cut off, being rewound or copied
	RoleDown      = "down"      // not answering

	RoleFromServer  = "server"
	RoleFromManager = "manager"
)

// Router is a cluster whose clients find the node that takes writes
// themselves, as real clients of an HA cluster do (a host list that
// libpq tries in turn for a read-write one, a proxy that health-checks
// the manager, or a fixed node), rather than through replab's view of
// the topology.
type Router interface {
	// Route is how clients find the primary, in a few words ("libpq host
	// list p1, e1, a1 with target_session_attrs=read-write").
	Route() string
	// RoutePool is a pool for clients in fromSite whose connections reach
	// the node that takes writes, by the route.
	RoutePool(ctx context.Context, fromSite string) (*sql.DB, error)
}

// ConnPlacer is a cluster that can tell which node a client's connection
// reached: with a route, any node may be behind a pool. The verification
// journal records every acknowledged commit with it, for the split-brain
// measures.
type ConnPlacer interface {
	// ConnNode names the node behind conn: a driver connection
	// (database/sql's Conn.Raw gives it) or a Pipe; "" when it cannot
	// tell.
	ConnNode(conn any) string
}

// LogKeeper is a cluster whose servers' (and managers') logs are worth
// keeping with the results: the lab's data goes with the lab, and what an
// HA manager decided is only in its log.
type LogKeeper interface {
	// KeepLogs copies the logs into dir (created), one file each.
	KeepLogs(dir string) error
}

// ReadFence lets a client's read at a replica wait for its own writes
// (read-your-writes by position): after a commit at a source, a position
// in its replication stream at or after that commit; before a read at a
// replica, a wait until the replica has applied it. PostgreSQL: an LSN,
// and pg_last_wal_replay_lsn() polled; MariaDB: a GTID position, and
// MASTER_GTID_WAIT.
type ReadFence interface {
	// CommitPosition is a position at or after every commit q's node had
	// acknowledged when it answered. q is any connection to that node.
	CommitPosition(ctx context.Context, q Querier) (string, error)
	// WaitApplied returns once q's node has applied everything up to pos
	// (at once on a node that takes writes), or an error after timeout.
	WaitApplied(ctx context.Context, q Querier, pos string, timeout time.Duration) error
}

// Querier is a connection or a pool: *sql.DB, *sql.Conn, *sql.Tx.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ErrorClassifier says what a server's error means to a client.
type ErrorClassifier interface {
	Classify(err error) ErrorClass
}

// ErrorClass is what an error means to a client.
type ErrorClass struct {
	// Code names it for counting: an SQLSTATE ("40001"), a server error
	// number ("1213"), or one of "timeout", "canceled", "connection",
	// "other".
	Code string
	// Retry: the same transaction may succeed if tried again.
	Retry bool
	// Conflict: it lost to a concurrent transaction (serialization
	// failure, deadlock, certification failure).
	Conflict bool
	// Unavailable: the node answered but cannot serve this now (a Galera
	// member outside the primary component, a server starting or shutting
	// down, a read-only node): a client with a list of nodes tries the next
	// one rather than this one again.
	Unavailable bool
}

// KVStore is a cluster of key-value stores reached over their own protocol
// (Berkeley DB Java Edition): records go in as puts, in transactions, and
// come back out of reads at the master or at a replica.
type KVStore interface {
	// KVClient connects, with dial (from the client's site), to the node
	// that takes writes now; the client follows the master when it moves.
	KVClient(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (KVClient, error)
}

// KVClient is one client's connection; one goroutine uses it.
type KVClient interface {
	// Put writes recs in one transaction at the master and commits it.
	// With stamp.Seq > 0 the same transaction carries the lag probe's
	// stamp (writer stamp.Writer at stamp.Seq), and stamp.Sending is
	// called just before the commit leaves; with stamp.AckSeq > 0 it
	// also records the acknowledged-commits journal's key (KVAcks). The commit
	// is where it landed; its Node is set whenever the put reached a node,
	// even when it failed. An error wraps ErrNotCommitted when the
	// transaction certainly did not commit (refused before its commit, or
	// never sent); after any other error its outcome is unknown.
	Put(ctx context.Context, recs []KVRecord, stamp KVStamp) (KVCommit, error)
	// Get reads keys in one read-only transaction at read.Node (""
	// the master, followed when it moves). A replica first meets
	// read.Consistency, waiting up to read.Timeout. Values[i] is keys[i]'s
	// value, nil when the key is absent (a present empty value is
	// non-nil).
	Get(ctx context.Context, keys [][]byte, read KVRead) (KVValues, error)
	Close() error
}

// KVRecord is one record.
type KVRecord struct {
	Key, Value []byte
}

// KVStamp is what a Put carries besides its records: the lag probe's
// stamp (Seq 0: untracked) and the acknowledged-commits journal's key
// (AckSeq 0: none).
type KVStamp struct {
	Writer  int
	Seq     int64
	Sending func()

	AckWriter int
	AckSeq    int64
}

// KVCommit is where a Put's transaction committed.
type KVCommit struct {
	// Node is the master it was sent to.
	Node string
	// Position is the commit's place in the replication stream (JE: its
	// VLSN); 0 when unknown.
	Position int64
}

// KVConsistency is what a read at a replica waits for first (JE's
// replica consistency policies).
type KVConsistency string

// The consistency policies.
const (
	// KVNone reads whatever the replica has now (the default, "").
	KVNone KVConsistency = "none"
	// KVTime waits until the replica is no more than KVRead.MaxLag
	// behind the master.
	KVTime KVConsistency = "time"
	// KVCommitPoint waits until the replica has replayed the client's
	// own last acknowledged Put: read-your-writes. A client that has put
	// nothing yet waits for nothing.
	KVCommitPoint KVConsistency = "commit"
)

// KVRead is where a Get reads and what it waits for there.
type KVRead struct {
	// Node is the node read at; "" is the master.
	Node        string
	Consistency KVConsistency
	// MaxLag is KVTime's bound.
	MaxLag time.Duration
	// Timeout bounds the replica's wait; past it the read fails (JE:
	// the "consistency" error). 0: 5 s.
	Timeout time.Duration
}

// KVValues is what a Get read, and where.
type KVValues struct {
	Node   string
	Values [][]byte
}

// ErrNotCommitted is wrapped by a Put's error when its transaction
// certainly did not commit.
var ErrNotCommitted = errors.New("not committed")

// KVAcks reads back the acknowledged-commits journal's keys that puts recorded
// (KVStamp.AckWriter, AckSeq), at one node.
type KVAcks interface {
	// AckKeys calls f with every key node holds, read from the node's
	// own site.
	AckKeys(ctx context.Context, node string, f func(writer int, seq int64)) error
}

// Dialecter is an Engine (not a cluster) that speaks SQL: its dialect is
// known before any node is up, so a spec's SQL workload can be checked at
// once.
type Dialecter interface {
	Dialect() Dialect
}

// CopySizer is an Engine that can say, from the spec alone, how many bytes
// a node receives from its upstream to start (a base backup), besides the
// workload's data: how long provisioning across a slow link would take.
type CopySizer interface {
	InitialCopyBytes(s *spec.Spec, node string) int64
}

// SinkRunner is an Engine whose servers another engine's replication
// scheme applies changes to, run by that engine's cluster: PostgreSQL's
// pipeline scheme with [scheme] target = "mariadb" runs its replicas as
// MariaDB servers, its sinks. The other engine finds this one through
// the registry (a Finder), never by importing it.
type SinkRunner interface {
	// StartSinks installs and starts the named nodes of l's spec as
	// servers of this engine, none replicating from another, and waits
	// until they answer. On error nothing it started remains.
	StartSinks(ctx context.Context, l *lab.Lab, names []string, log io.Writer) (Sinks, error)
}

// Sinks are the servers a SinkRunner started, for the cluster that runs
// them: it reaches them with SQL, reads the lag probe's stamps there
// (LagReaders) and does to them what faults do (NodeControl, Pauser).
type Sinks interface {
	// Version is the servers' version.
	Version() string
	// DSN is node's connection string, with its password: it works from
	// every site.
	DSN(node string) string
	// Running says whether node's server runs.
	Running(node string) bool
	// Exec runs one statement at node; QueryInt64 reads one integer.
	Exec(ctx context.Context, node, q string, args ...any) error
	QueryInt64(ctx context.Context, node, q string, args ...any) (int64, error)
	// Open is a pool to node whose connections are made from fromSite.
	Open(ctx context.Context, node, fromSite string) (*sql.DB, error)
	// Processes are the servers' processes (or threads) by role.
	Processes(ctx context.Context) ([]Process, error)
	LagReaders
	NodeControl
	Pauser
	// Close stops every server.
	Close() error
}
