package faultkind

import (
	"context"
	"errors"

	"replab/internal/linkem"
)

// World is everything a fault can do: to the lab's links and to the
// cluster's nodes. The runner implements it for a run's schedule, the lab
// for faults made through its control socket.
type World interface {
	Links
	Nodes
}

// Links is what a fault can do to the lab's link directions.
type Links interface {
	// LinkParams reads a direction's parameters (to put them back later).
	LinkParams(from, to string) (linkem.Params, error)
	// SetLink applies replab link set's changes (key=value, down, up) to
	// from->to, and to->from when both; a change that fails changes
	// nothing.
	SetLink(from, to string, both bool, changes []string) error
	// RestoreLink puts a direction's parameters back as LinkParams read
	// them.
	RestoreLink(from, to string, p linkem.Params) error
}

// Nodes is what a fault can do to the cluster's nodes. Each may fail with
// an error that Is ErrCannot when the engine cannot do it at all.
type Nodes interface {
	Kill(ctx context.Context, node string) error    // SIGKILL: a crash
	Stop(ctx context.Context, node string) error    // a clean shutdown
	Start(ctx context.Context, node string) error   // start a stopped or killed node
	Restart(ctx context.Context, node string) error // stop, then start
	Pause(ctx context.Context, node string) error   // SIGSTOP: it hangs with its connections open
	Resume(ctx context.Context, node string) error  // SIGCONT
	Promote(ctx context.Context, node string) error // a standby becomes the primary
	// Stage does kill, stop, start, restart, pause or resume (action) to
	// one of node's replication stages.
	Stage(ctx context.Context, node, stage, action string) error
}

// ErrCannot is what an action the engine cannot do at all Is.
var ErrCannot = errors.New("the engine cannot do that")

// Cannot is the error for an action engine cannot do: "engine xrootd
// cannot promote nodes".
func Cannot(engine, what string) error { return &cannotError{engine, what} }

type cannotError struct{ engine, what string }

func (e *cannotError) Error() string        { return "engine " + e.engine + " cannot " + e.what }
func (e *cannotError) Is(target error) bool { return target == ErrCannot }

// ErrStaysDown is a heal refused on purpose (a primary that a standby was
// promoted over stays out): the fault is logged as not healed, not as a
// failure.
var ErrStaysDown = errors.New("stays down")
