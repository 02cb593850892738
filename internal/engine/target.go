package engine

import (
	"context"
	"database/sql"
	"io"

	"replab/internal/spec"
)

// Target mode's contract. A spec with [target] measures servers that
// exist already instead of building a lab. Package target, registered
// under TargetKind, does what is common to every engine (the topology
// check, replab's schema, the lag readers and their bounds); an engine
// whose servers can be measured so implements Attacher, its own side.

// TargetKind is the kind under which target mode registers: the engine
// of every spec with [target] (TargetMode), which reaches servers that
// exist instead of building them in a lab.
const TargetKind = "target"

// SpecEngine is a registered engine that is made anew for each spec (its
// dialect, say, is the spec's).
type SpecEngine interface {
	ForSpec(s *spec.Spec) Engine
}

// TargetMode is the engine registered under TargetKind. Its cluster
// exists already: Connect reaches the servers of s's [target] through
// their engine's Attacher, checks them against the spec, and builds
// nothing.
type TargetMode interface {
	Connect(ctx context.Context, s *spec.Spec, log io.Writer) (Cluster, error)
}

// Attacher is an Engine whose servers replab can measure where they are,
// built and run by someone else ([target] engine = "…").
type Attacher interface {
	// ValidateTarget checks s's [target] nodes for this engine without
	// reaching them: connection strings that parse and carry no
	// password, roles it can read. Errors point at file:line.
	ValidateTarget(s *spec.Spec) error
	// Attach prepares connections to t's nodes (password, when not "",
	// for every node's user). It reaches no server yet.
	Attach(t *spec.Target, password string) (Attached, error)
	// Opener checks one server's connection string, as the lag agent
	// beside a replica is given it, and returns how to open pools to the
	// server. Its error says what such a string looks like.
	Opener(dsn string) (open func() (*sql.DB, error), err error)
}

// Attached is an engine's side of target mode: its servers as they are,
// reached through the connection strings of [target.node.NAME]. Nodes
// are named as there; primary is the node that takes writes (the first
// master of a multi-master cluster). Errors need not name the node: the
// caller adds it. An Attached whose connections can pipeline is a
// Pipeliner too.
type Attached interface {
	// Addr is where node's server is, from its connection string.
	Addr(node string) (host string, port int)
	// Facts reads what node says of itself.
	Facts(ctx context.Context, node string) (ServerFacts, error)
	// Schema reads what exists of replab's schema ([target] schema) at
	// the primary, and whether replab may create it.
	Schema(ctx context.Context, primary string) (SchemaState, error)
	// Tables lists the tables in replab's schema, in lower case.
	Tables(ctx context.Context, primary string) ([]string, error)
	// Create makes replab's schema unless it exists, then s's tables in
	// it; made is called once the schema exists, so that a later failure
	// still drops it.
	Create(ctx context.Context, primary string, s Schema, exists bool, made func()) error
	// Open is a pool to node whose connections use replab's schema.
	Open(node string) (*sql.DB, error)
	// Position is the primary's replication position now; Reached says
	// whether node has applied pos, and where node is.
	Position(ctx context.Context, primary string) (string, error)
	Reached(ctx context.Context, node, pos string) (done bool, at string, err error)
	// State is node's replication state; from names its upstreams, pos
	// is the primary's Position.
	State(ctx context.Context, node, from, pos string) (ReplicaState, error)
	// Drop drops replab's schema at the primary.
	Drop(ctx context.Context, primary string) error
	// Close closes the connections it keeps.
	Close()
}

// ServerFacts is what a server says of itself, for target mode's check
// of the topology a spec describes.
type ServerFacts struct {
	Version string // with the product's name: "PostgreSQL 15.8"
	// Replica: the server replicates from another (it is in recovery, it
	// has a replication source).
	Replica bool
	// SystemID identifies the copy of the data a replica must share with
	// its upstream (PostgreSQL's system identifier); "" where the engine
	// has none.
	SystemID string
	// UpstreamHost and UpstreamPort are where a replica streams from;
	// Receiving says that it receives now (a WAL receiver, a running I/O
	// thread).
	UpstreamHost string
	UpstreamPort int
	Receiving    bool
	// Group identifies the multi-master cluster the server is a member
	// of (a Galera cluster's state UUID), "" when it is in none;
	// GroupKind names such clusters in messages ("Galera cluster").
	Group, GroupKind string
	// NotMaster says, in the engine's words, why the server cannot be
	// measured as a master (a member of no multi-master cluster, or not a
	// full member now); "" when it can.
	NotMaster string
}

// SchemaState is what exists of replab's schema at a primary.
type SchemaState struct {
	// Word is what the engine calls it: "schema" (PostgreSQL), "database"
	// (MariaDB).
	Word   string
	Exists bool
	// Objects lists what it holds, comma separated; "" when nothing.
	Objects string
	// CannotCreate says why replab's user may not create it, and what to
	// grant; "" when it may (or when only trying would tell).
	CannotCreate string
}

// LagBounder is a LagReader whose times are not the lab's one clock read
// beside the replica: a reader polling across a WAN from the driver's
// host, or an agent on the replica's host with a clock of its own. It
// says how its times were corrected and how far a lag may be off.
type LagBounder interface {
	LagBound() LagBound
}

// LagBound is how a replica's lags were timed.
type LagBound struct {
	// Method: "remote-poll" (polled from the driver's host, corrected by
	// the one-way time), "agent" (polled on the replica's host, its clock
	// offset estimated).
	Method string `json:"method"`
	// CorrectionMs is what was taken off (the one-way time) or the clock
	// offset applied, in ms.
	CorrectionMs float64 `json:"correction_ms"`
	// BoundMs: each lag may be off by up to ± this much because of the
	// correction, besides the watcher's own resolution.
	BoundMs float64 `json:"bound_ms"`
}
