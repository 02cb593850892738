package driver

import (
	"database/sql"
	"time"

	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/workload"
)

// Config is how to drive.
type Config struct {
	Users      int
	Warmup     time.Duration
	Duration   time.Duration
	Cooldown   time.Duration
	RatePerSec float64 // > 0: open loop
	// Transactions > 0 ends the measure phase once that many transactions
	// started in it have finished, committed or not (pgbench's -t, over
	// all users), or at Duration if that comes first; the cooldown
	// follows. Closed loop only.
	Transactions int64
	// MeasureEnded, when set, is called once when Transactions ended the
	// measure phase before Duration, with the moment it ended.
	MeasureEnded func(at time.Time)
	Poisson      bool // open loop arrivals: Poisson (true) or regular
	ThinkMin     time.Duration
	ThinkMax     time.Duration
	Seed         int64
	// MaxErrorPct stops the run when, in one second with at least 20
	// attempts, more than this share failed.
	MaxErrorPct float64
	// MaxRetries is how often a transaction that failed with a retryable
	// error (serialization failure, deadlock) is tried again.
	MaxRetries int
	// StartRetry is how long a user keeps making a connection that is lost
	// as it is made, before the run starts (connectAtStart); default 10 s.
	StartRetry time.Duration
	// Classify says what an error means (its code, whether to retry it,
	// whether it lost a conflict): the engine's classifier. Default
	// engine.DefaultClass.
	Classify func(error) engine.ErrorClass
	// Pipeliner, when set, sends a transaction type that has a Batch in
	// one round trip (the engine's engine.Pipeliner).
	Pipeliner engine.Pipeliner
	// Lag, if set, gives user i's lag journal; LagStatement is then run
	// inside every tracked writing transaction with (seq, user).
	Lag          func(user int) LagJournal
	LagStatement string
	// LagPositions, if set, gives user i's position journal: the lag
	// probe's position method follows every writing transaction, its
	// COMMIT-sent time and, once it committed, its commit's position, read
	// with the commit itself: a pipe's RunPositioned (engine.PositionPipe),
	// or, statement by statement, Positions on the user's connection.
	LagPositions func(user int) PositionJournal
	// Positions reads commit positions on connections of Targets' pools
	// (the engine's engine.SessionPositions); nil: none there.
	Positions engine.SessionPositions
	// Journal, if set, is run inside every writing transaction with
	// (seq, user), seq counting that user's writing transactions from 1:
	// it records the commit's key in the acknowledged-commits journal (a table),
	// and the driver keeps each one's outcome (Result.Journal), so that
	// what was acknowledged can be looked for at every node afterwards.
	AckStatement string
	// ConnNode, if set, names the node a connection reached: a driver
	// connection (sql.Conn.Raw's) or an engine.Pipe (the engine's
	// engine.ConnPlacer). The journal then says which node acknowledged
	// each commit (UserAcks.Spans).
	ConnNode func(conn any) string
	// AckWriterBase is added to the user's number in the journal's
	// writer column: each measurement of a run journals under writers of
	// its own.
	AckWriterBase int
	// LagEvery tracks every LagEvery-th transaction of each user (1 tracks
	// all): a stated sample that cuts the probe's extra statement from the
	// other transactions. 0 chooses it (autoLagEvery): about LagBudget
	// tracked transactions per second across all users.
	LagEvery int
	// LagBudget is the automatic sample's tracked transactions per second,
	// all users together; 0 means DefaultLagBudget.
	LagBudget float64
	// NoPipeline sends every statement on its own round trip even when
	// the transaction type and connection could pipeline it.
	NoPipeline bool
	// Progress is called once a second from the driver's own goroutine.
	Progress func(Progress)
	// Observer, if set, sees every transaction's outcome as it happens,
	// in every phase (live metrics).
	Observer Observer
	// Now is the clock (CLOCK_MONOTONIC ns); default clock.Now.
	Now func() int64
	// History, when set, records every attempt of every transaction the
	// users issue, in every phase ([run] history; see history.go): a
	// *history.Writer. The workload adds the micro-operations through
	// the workload.Recorder it is handed.
	History History
	// NodeOf names the node behind a pool that Pools gave, for the
	// history; nil names none.
	NodeOf func(*sql.DB) string
	// Fence, when set, takes a commit position after every writing
	// transaction, at its source, and makes the reads of types with
	// WaitOwnWrites wait until their node has applied it (readafter.go);
	// FenceTimeout bounds such a wait (default DefaultFenceTimeout).
	Fence        engine.ReadFence
	FenceTimeout time.Duration
	// Groups of users (groups.go): Group names user u's group (nil: no
	// groups), Runs says whether user u runs transaction type t (nil:
	// every type), Place where (nil: t.At).
	Group func(user int) string
	Runs  func(user int, t *workload.TxType) bool
	Place func(user int, t *workload.TxType) string
}

// History is where the driver records operations: a *history.Writer.
// Record is called from every user at once.
type History interface {
	Record(history.Op) (int, error)
}

// HistorySampler is a History that records a part of the run only (the
// overhead bench records in alternate slices): the driver asks it as
// each attempt starts. An attempt it declines is not recorded and costs
// what it costs without a history.
type HistorySampler interface {
	History
	RecordAt(now int64) bool
}

// Observer sees transactions as they end, from the users' goroutines:
// it must be quick and safe for concurrent use.
type Observer interface {
	// Committed: a transaction of type txType committed, latencyNs after
	// its start (open loop: its intended start).
	Committed(txType string, latencyNs int64)
	// Failed: it failed after its retries, with the error's class (code).
	Failed(txType, code string)
}

// LagJournal is the lag probe's record of one user's transactions.
type LagJournal interface {
	Next() int64
	Sending(seq int64, at int64, measured bool)
	Done(seq int64, ok bool)
}

// PositionJournal is the lag probe's record of one user's commits for
// the position method (lagprobe.PosWriter).
type PositionJournal interface {
	// Next says whether the user's next writing transaction is followed
	// (its commit's position read, at some cost to the server).
	Next() bool
	// Sending: the followed transaction's COMMIT leaves at at.
	Sending(at int64)
	// Done: it returned, committed (ok) at position pos (0: unknown), or
	// not.
	Done(ok bool, pos int64, measured bool)
}

// Progress is the live view printed during a run.
type Progress struct {
	Phase     string
	Elapsed   time.Duration
	Remaining time.Duration
	TPS       float64 // commits in the last second
	P99Ms     float64 // latency p99 in the last second
	Errors    int64   // in the last second
}

// endGrace is how long in-flight transactions may take to finish after the
// last phase ends.
const endGrace = 30 * time.Second

// Phase names.
const (
	Warmup   = "warmup"
	Measure  = "measure"
	Cooldown = "cooldown"
)
