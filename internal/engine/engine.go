// Package engine is the interface between a lab and the database servers
// that run in its sites. An Engine provisions nodes and sets up a
// replication scheme across them; the resulting Cluster reports its nodes,
// their processes and replication state, and tears them down. Engines live
// in subpackages (engine/postgres, …) and are collected in a Registry.
package engine

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	"replab/internal/lab"
	"replab/internal/spec"
)

// Engine is one kind of database server.
type Engine interface {
	// Kind is the name used in specs: [engine] kind = "…".
	Kind() string
	// Dialect is the SQL flavour workloads write for it: "postgres" or "mysql".
	Dialect() string
	// Validate checks the spec's nodes and scheme for this engine. Errors
	// point at file:line (spec.Errorf) and list what is supported.
	Validate(s *spec.Spec) error
	// Up provisions every node in its site, sets up the scheme and waits
	// until replication flows. On error nothing it started remains.
	Up(ctx context.Context, l *lab.Lab, log io.Writer) (Cluster, error)
}

// Cluster is a running set of nodes.
type Cluster interface {
	Nodes() []Node
	// Open returns a connection pool to node whose connections are made
	// from fromSite, so their traffic crosses the links a client there
	// would use.
	Open(ctx context.Context, node, fromSite string) (*sql.DB, error)
	// ApplySchema creates tables wherever the scheme needs them (at the
	// primary, at every master, at logical replicas) and adds them to
	// replication.
	ApplySchema(ctx context.Context, s Schema) error
	// WaitFlowing writes a marker at every source and waits until it is
	// visible at every target.
	WaitFlowing(ctx context.Context) error
	// ReplicationState reads each replica's position as the engine sees it.
	ReplicationState(ctx context.Context) ([]ReplicaState, error)
	// Processes lists every server process with its role.
	Processes(ctx context.Context) ([]Process, error)
	// Close stops every node. It is safe to call more than once.
	Close() error
}

// Node describes one running server.
type Node struct {
	Name    string         `json:"name"`
	Site    string         `json:"site"`
	Role    string         `json:"role"`
	From    string         `json:"from,omitempty"`
	Addr    netip.AddrPort `json:"addr"`
	DSN     string         `json:"dsn"` // works from every site of the lab
	Version string         `json:"version"`
}

// Schema is what a workload needs created.
type Schema struct {
	Tables []Table
}

// Table is one table. Create holds its CREATE TABLE statement per SQL
// dialect ("postgres", "mysql"); every table needs a primary key, which
// logical and multi-master replication use to match rows.
type Table struct {
	Name   string
	Create map[string]string
	// Indexes are extra CREATE INDEX statements per dialect.
	Indexes map[string][]string
	// Everywhere replicates the table, whole, to every replica, whatever
	// its filters: replab's own bookkeeping (the lag probe's table).
	Everywhere bool
}

// ReplicaState is one replica's replication position.
type ReplicaState struct {
	Node        string `json:"node"`
	From        string `json:"from"`
	Kind        string `json:"kind"`  // "physical", "logical", …
	State       string `json:"state"` // the engine's own word: streaming, catchup, …
	SentLSN     string `json:"sent_lsn,omitempty"`
	WriteLSN    string `json:"write_lsn,omitempty"`
	FlushLSN    string `json:"flush_lsn,omitempty"`
	ReplayLSN   string `json:"replay_lsn,omitempty"`
	BytesBehind int64  `json:"bytes_behind"` // source's current position minus replayed
	SyncState   string `json:"sync_state,omitempty"`
	// ReplayLagMs is the engine's own estimate of how far replay trails
	// (PostgreSQL: replay_lag); negative when the engine has none (idle).
	ReplayLagMs float64 `json:"replay_lag_ms"`
}

// Process is one server process.
type Process struct {
	Node string `json:"node"`
	Role string `json:"role"` // backend, walsender, walreceiver, startup, checkpointer, walwriter, …
	PID  int    `json:"pid"`
}

// Registry holds the engines a replab binary knows.
type Registry struct {
	byKind map[string]Engine
}

// NewRegistry collects engines.
func NewRegistry(engines ...Engine) *Registry {
	r := &Registry{byKind: map[string]Engine{}}
	for _, e := range engines {
		r.byKind[e.Kind()] = e
	}
	return r
}

// Kinds lists the registered engine kinds, sorted.
func (r *Registry) Kinds() []string {
	var k []string
	for n := range r.byKind {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

// For returns the engine a spec asks for, after validating the spec with
// it; nil when the spec has no engine.
func (r *Registry) For(s *spec.Spec) (Engine, error) {
	if s.Engine == nil {
		return nil, nil
	}
	e, ok := r.byKind[s.Engine.Kind]
	if !ok {
		return nil, s.Errorf("engine.kind", "unknown engine %q; engines: %s", s.Engine.Kind, strings.Join(r.Kinds(), ", "))
	}
	if err := e.Validate(s); err != nil {
		return nil, err
	}
	return e, nil
}

// Errors collects spec errors from a validation pass.
type Errors struct {
	s    *spec.Spec
	list spec.ErrorList
}

// NewErrors starts a validation pass over s.
func NewErrors(s *spec.Spec) *Errors { return &Errors{s: s} }

// Add records an error at field.
func (e *Errors) Add(field, format string, args ...any) {
	e.list = append(e.list, e.s.Errorf(field, format, args...))
}

// Err returns the errors sorted by line, or nil.
func (e *Errors) Err() error {
	if len(e.list) == 0 {
		return nil
	}
	sort.SliceStable(e.list, func(i, j int) bool { return e.list[i].Line < e.list[j].Line })
	return e.list
}

// Describe prints one line per node, for lab up.
func Describe(w io.Writer, nodes []Node) {
	for _, n := range nodes {
		from := ""
		if n.From != "" {
			from = " from " + n.From
		}
		fmt.Fprintf(w, "node %-8s %-8s in %-10s %s%s\n", n.Name, n.Role, n.Site, n.DSN, from)
	}
}
