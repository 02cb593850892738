package fake

import (
	"context"
	"database/sql"
	"fmt"

	"replab/internal/engine"
)

// Lag by commit position (engine.Positions): with one primary, every
// change is numbered at the primary (its seq) and every replica applies
// the primary's changes in that order, so a commit is visible at a
// replica once the replica has applied the change of that number. A
// client learns its commit's number with the commit (its connection keeps
// it: engine.SessionPositions). Masters number their changes apart: no
// positions there.

var (
	_ engine.Positions        = (*cluster)(nil)
	_ engine.SessionPositions = (*cluster)(nil)
)

// PositionMethod implements engine.Positions: every replica of the async
// scheme.
func (c *cluster) PositionMethod(name string) string {
	n := c.byName[name]
	if n == nil || c.plan.replication != Async || len(n.ups) == 0 {
		return ""
	}
	return "change number"
}

// CommitPositions implements engine.Positions.
func (c *cluster) CommitPositions() engine.CommitPositions { return engine.SessionCommits }

// PositionReader implements engine.Positions.
func (c *cluster) PositionReader(ctx context.Context, name string) (engine.PositionReader, error) {
	n, err := c.node(name)
	if err != nil {
		return nil, err
	}
	return posReader{n}, nil
}

type posReader struct{ n *node }

// Applied implements engine.PositionReader.
func (r posReader) Applied(ctx context.Context) (int64, error) {
	if r.n.down.Load() {
		return 0, errDown(r.n)
	}
	if err := r.n.waitPaused(ctx); err != nil {
		return 0, err
	}
	return r.n.pos.Load(), nil
}

func (posReader) Close() error { return nil }

// CommitPositionsOf implements engine.SessionPositions.
func (c *cluster) CommitPositionsOf(ctx context.Context, sc *sql.Conn) (func() int64, error) {
	var fc *conn
	if err := sc.Raw(func(dc any) error {
		var ok bool
		if fc, ok = dc.(*conn); !ok {
			return fmt.Errorf("not a fake connection: %T", dc)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return fc.last.Load, nil
}

// appliedPos records that the applier applied ch: the primary's changes
// are the positions.
func (n *node) appliedPos(ch *change) {
	if o := n.c.byName[ch.origin]; o != nil && o.Role == "primary" {
		n.pos.Store(ch.seq)
	}
}
