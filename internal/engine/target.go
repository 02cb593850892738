package engine

import (
	"context"
	"io"

	"replab/internal/spec"
)

// Target mode's contract: a spec with [target] measures servers that
// exist already instead of building a lab.

// TargetKind is the kind under which target mode registers: the engine
// of every spec with [target], which connects to servers that exist
// (Connector) instead of building them in a lab.
const TargetKind = "target"

// SpecEngine is a registered engine that is made anew for each spec (its
// dialect, say, is the spec's).
type SpecEngine interface {
	ForSpec(s *spec.Spec) Engine
}

// Connector is an engine whose cluster exists already: Connect reaches
// and checks it, and builds nothing (target mode).
type Connector interface {
	Connect(ctx context.Context, s *spec.Spec, log io.Writer) (Cluster, error)
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
