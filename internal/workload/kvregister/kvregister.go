// Package kvregister is the rw-register checking workload on a key-value
// engine (Berkeley DB Java Edition): transactions that write unique values
// to a few registers at the master, or read them — at the master or at a
// replica, under one of JE's read consistency policies — and record every
// operation, with the values written and read, into the run's history for
// the checker (internal/check). Kind "kv-register"; the SQL engines'
// rw-register lives in its own package.
package kvregister

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"replab/internal/engine"
	"replab/internal/workload"
)

// Factory registers the workload as kind "kv-register".
var Factory = workload.Factory{Kind: "kv-register", New: New}

// Option defaults and bounds.
const (
	DefaultKeys               = 8
	MaxKeys                   = 100_000
	DefaultOpsPerTxn          = 4
	MaxOpsPerTxn              = 64
	DefaultReadShare          = 0.5
	DefaultConsistencyTimeout = 5 * time.Second
)

// Where reads run (reads_at).
const (
	ReadsAtSource  = "source"
	ReadsAtReplica = "replica"
	ReadsAtAny     = "any"
)

// Transaction type names, as the history's txn_type.
const (
	TxWrite = "write"
	TxRead  = "read"
)

// Workload is kv-register with its options resolved.
type Workload struct {
	keys        int
	opsPerTxn   int
	readShare   float64
	readsAt     string
	consistency engine.KVConsistency
	maxLag      time.Duration
	timeout     time.Duration

	mu      sync.Mutex
	users   []*user      // one per driver user, made by Connect
	cluster any          // for classifying errors
	nodes   []string     // every node, for reads_at = "any"
	keyBase int64        // the first key of this measurement
	round   int64        // measurements connected so far
	next    atomic.Int64 // the last value written (values are unique)
}

// user is one driver user's client and session.
type user struct {
	c      engine.KVClient
	readAt string // reads_at = "replica": this user's replica
}

// New reads the options: keys, ops_per_txn, read_share, reads_at,
// consistency and consistency_timeout.
func New(o *workload.Options) (workload.Workload, error) {
	w := &Workload{
		keys:      int(o.Int("keys", DefaultKeys, 1, MaxKeys)),
		opsPerTxn: int(o.Int("ops_per_txn", DefaultOpsPerTxn, 1, MaxOpsPerTxn)),
		readShare: o.Float("read_share", DefaultReadShare, 0, 1),
		readsAt:   o.String("reads_at", ReadsAtSource, ReadsAtSource, ReadsAtReplica, ReadsAtAny),
		timeout:   o.Duration("consistency_timeout", DefaultConsistencyTimeout, time.Millisecond, time.Hour),
	}
	c := o.String("consistency", "none")
	var err error
	if w.consistency, w.maxLag, err = ParseConsistency(c); err != nil {
		o.Errorf("consistency", "%v", err)
	}
	if o.Dialect != engine.KV {
		return nil, fmt.Errorf("kv-register runs on key-value engines (bdbje): engine dialect %q has no puts and reads of records", o.Dialect)
	}
	return w, nil
}

// ParseConsistency reads a consistency option: "none", "time:DURATION"
// (the replica at most that far behind the master) or "commit" (the
// replica has replayed the client's own last put).
func ParseConsistency(s string) (engine.KVConsistency, time.Duration, error) {
	switch {
	case s == "none" || s == "":
		return engine.KVNone, 0, nil
	case s == "commit":
		return engine.KVCommitPoint, 0, nil
	case strings.HasPrefix(s, "time:"):
		d, err := time.ParseDuration(strings.TrimPrefix(s, "time:"))
		if err != nil || d < 0 {
			return "", 0, fmt.Errorf("want time:DURATION with a unit, like \"time:100ms\", got %q", s)
		}
		return engine.KVTime, d, nil
	case s == "time":
		return "", 0, errors.New(`"time" needs its bound, like "time:100ms"`)
	}
	return "", 0, fmt.Errorf(`unknown consistency %q; choose "none", "time:DURATION" (e.g. "time:100ms") or "commit"`, s)
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return "kv-register" }

// HistoryByDefault implements workload.HistoryByDefault: a run records
// and checks its history unless the spec says [run] history = false.
func (w *Workload) HistoryByDefault() bool { return true }

// Schema implements workload.Workload: the records go into the engine's
// one store of records, kv (which the convergence check compares); there
// is nothing to create.
func (w *Workload) Schema() engine.Schema {
	return engine.Schema{Tables: []engine.Table{{Name: "kv"}}}
}

// TotalRows implements workload.Workload: nothing is loaded; every
// register starts empty (the history's initial nil).
func (w *Workload) TotalRows() int64 { return 0 }

// Load implements workload.Workload.
func (w *Workload) Load(context.Context, workload.Loader, func(int64)) error { return nil }

// Transactions implements workload.Workload: "write" puts unique values
// into 1 … ops_per_txn registers in one transaction at the master; "read"
// reads 1 … ops_per_txn registers in one read-only transaction where
// reads_at says. Weights: read_share of 1000 to reads.
func (w *Workload) Transactions() []workload.TxType {
	reads := int(w.readShare*1000 + 0.5)
	var types []workload.TxType
	if reads < 1000 {
		types = append(types, workload.TxType{Name: TxWrite, Weight: 1000 - reads, Op: w.write})
	}
	if reads > 0 {
		types = append(types, workload.TxType{Name: TxRead, Weight: reads, ReadOnly: true, Op: w.read})
	}
	return types
}
