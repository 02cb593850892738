package engine

// ReplicaState is one replication stream as the engine sees it: who feeds
// whom, the engine's own words for its state, how far the replica trails
// in the engine's own unit, and its positions verbatim.
type ReplicaState struct {
	Node      string `json:"node"`
	From      string `json:"from"`
	Kind      string `json:"kind"`  // "physical", "logical", "pglogical", "galera", …
	State     string `json:"state"` // the engine's word: streaming, catchup, Synced, …
	SyncState string `json:"sync_state,omitempty"`
	// Backlog is how far the replica trails its upstream, in BacklogUnit:
	// PostgreSQL the bytes of WAL not yet replayed, a write-set queue its
	// length, a binlog applier the transactions behind.
	Backlog     int64  `json:"backlog"`
	BacklogUnit string `json:"backlog_unit"`
	// Positions are the engine's positions as it writes them (PostgreSQL:
	// sent, write, flush and replay LSNs; a GTID set; a sequence number).
	Positions []Position `json:"positions,omitempty"`
	// ReplayLagMs is the engine's own estimate of how far replay trails
	// (PostgreSQL: replay_lag); negative when the engine has none (idle).
	ReplayLagMs float64 `json:"replay_lag_ms"`
	// Error is the replication's own error when it has stopped on one
	// (MariaDB's Last_SQL_Error or Last_IO_Error with its applier or
	// receiver not running); empty while it runs.
	Error string `json:"error,omitempty"`
}

// Backlog units.
const (
	UnitBytes        = "bytes"
	UnitTransactions = "transactions"
	UnitWriteSets    = "write-sets"
)

// Position is one named position of a stream.
type Position struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Position returns the named position's value, or "".
func (r ReplicaState) Position(name string) string {
	for _, p := range r.Positions {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// Process is one server process, or one thread of it when the engine runs
// its roles as threads of one process (MariaDB, a JVM).
type Process struct {
	Node string `json:"node"`
	Role string `json:"role"` // backend, walsender, walreceiver, startup, checkpointer, sql-thread, …
	PID  int    `json:"pid"`
	// TID is the thread the role runs on; 0 for the whole process.
	TID int `json:"tid,omitempty"`
	// Apply marks a role that receives or applies changes at a replica:
	// its CPU or I/O wait can bound how fast the replica keeps up.
	Apply bool `json:"apply,omitempty"`
}
