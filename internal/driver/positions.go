package driver

import (
	"context"
	"fmt"

	"replab/internal/engine"
)

// The lag probe's position method (Config.LagPositions): every writing
// transaction's commit position, read with the commit — no statement and
// no round trip of its own — from a pipe that can (engine.PositionPipe)
// or from the connection (engine.SessionPositions).

// follows says whether the user's position journal follows this attempt
// of ut (writing transactions only).
func (u *user) follows(ut *userType) bool {
	return u.pj != nil && !ut.t.ReadOnly && u.pj.Next()
}

// runPipe runs one pipelined transaction, reading its commit's position
// when asked and the pipe can.
func runPipe(ctx context.Context, p engine.Pipe, positioned bool, calls []engine.PipeCall, beforeSend func(), rows []int64) (int64, error) {
	if pp, ok := p.(engine.PositionPipe); ok && positioned {
		return pp.RunPositioned(ctx, calls, beforeSend, rows)
	}
	return 0, p.Run(ctx, calls, beforeSend, rows)
}

// sessionPositions sets c's new connection up to report its commits'
// positions, when the run follows them and the engine can.
func (d *run) sessionPositions(ctx context.Context, c *userConn) error {
	if d.cfg.LagPositions == nil || d.cfg.Positions == nil {
		return nil
	}
	f, err := d.cfg.Positions.CommitPositionsOf(ctx, c.conn)
	if err != nil {
		return fmt.Errorf("commit positions: %w", err)
	}
	c.pos = f
	return nil
}

// commitPosition is the position of the commit that just returned on c's
// connection with err; 0 when it failed or is unknown.
func (c *userConn) commitPosition(err error) int64 {
	if err != nil || c.pos == nil {
		return 0
	}
	return c.pos()
}
