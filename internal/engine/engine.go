// Package engine is the interface between a lab and the servers that run
// in its sites. An Engine checks a spec's nodes and scheme and brings up a
// Cluster; the core Cluster is what every system has (nodes, readiness,
// replication state, processes, close). What not every system has — SQL,
// a bulk path, lag stamps of its own, node control, snapshot refresh,
// error classification, pipelining — is a capability: a separate small
// interface a Cluster may implement, found by type assertion; an Engine
// may have some too (Dialecter, Attacher for target mode, SinkRunner).
// This package is the contract only: engines live in subpackages
// (engine/postgres, …), are built with the kit of package enginekit and
// are collected in a Registry.
package engine

import (
	"context"
	"fmt"
	"io"
	"net/netip"

	"replab/internal/lab"
	"replab/internal/spec"
)

// Engine is one kind of server.
type Engine interface {
	// Kind is the name used in specs: [engine] kind = "…".
	Kind() string
	// Validate checks the spec's nodes and scheme for this engine: the
	// [scheme] keys besides replication are the engine's own (read them
	// with s.SchemeOptions). Errors point at file:line and list what is
	// supported.
	Validate(s *spec.Spec) error
	// Up provisions every node in its site, sets up the scheme and waits
	// until replication flows. On error nothing it started remains.
	Up(ctx context.Context, l *lab.Lab, log io.Writer) (Cluster, error)
}

// Cluster is a running set of nodes.
type Cluster interface {
	// Nodes lists the nodes in spec order, with their topology.
	Nodes() []Node
	// WaitFlowing makes a change at every source and waits until it is
	// visible at every node that receives from it: replication flows.
	WaitFlowing(ctx context.Context) error
	// ReplicationState reads each replica's position as the engine sees it.
	ReplicationState(ctx context.Context) ([]ReplicaState, error)
	// Processes lists every server process (or thread) with its role.
	Processes(ctx context.Context) ([]Process, error)
	// Close stops every node. It is safe to call more than once.
	Close() error
}

// Node describes one running server and its place in the topology.
type Node struct {
	Name    string         `json:"name"`
	Site    string         `json:"site"`
	Role    string         `json:"role"`
	From    string         `json:"from,omitempty"` // as the spec wrote it
	Addr    netip.AddrPort `json:"addr"`
	DSN     string         `json:"dsn"` // works from every site of the lab
	Version string         `json:"version"`
	// Writable: the node accepts the workload's writes (a primary, every
	// master of a multi-master or Galera cluster).
	Writable bool `json:"writable"`
	// Upstreams are the nodes whose changes this one receives: its
	// upstream standby or primary, or every other master. A node with
	// upstreams is a replica for the lag probe, also when it is writable.
	Upstreams []string `json:"upstreams,omitempty"`
}

// Sources are the nodes clients write to, in order.
func Sources(nodes []Node) []Node {
	var out []Node
	for _, n := range nodes {
		if n.Writable {
			out = append(out, n)
		}
	}
	return out
}

// Replicas are the nodes that receive changes from another, in order.
func Replicas(nodes []Node) []Node {
	var out []Node
	for _, n := range nodes {
		if len(n.Upstreams) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// Roots are the sources that receive from no other node: a change made at
// each of them reaches every node. With none (every source is also a
// replica: multi-master), the first source alone.
func Roots(nodes []Node) []Node {
	var out []Node
	for _, n := range Sources(nodes) {
		if len(n.Upstreams) == 0 {
			out = append(out, n)
		}
	}
	if src := Sources(nodes); len(out) == 0 && len(src) > 0 {
		out = src[:1]
	}
	return out
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
