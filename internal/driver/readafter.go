package driver

import (
	"context"
	"fmt"
	"time"
)

// Reads after writes (issue 32): what an application does so that a
// read at a replica sees its own last write — wait a fixed time after
// the write (TxType.ReadDelay: Rails' 2 s), or wait until the replica has
// applied the write's commit position (TxType.WaitOwnWrites, through the
// engine's engine.ReadFence).

// DefaultFenceTimeout bounds a read's wait for its user's own writes.
const DefaultFenceTimeout = 10 * time.Second

// readDelay holds a read-only transaction of a type with a ReadDelay until
// that long after the user's last acknowledged write: paused says whether
// it waited, ok is false when the run ended meanwhile.
func (u *user) readDelay(ctx context.Context, ut *userType) (paused, ok bool) {
	d := ut.t.ReadDelay
	if !ut.t.ReadOnly || d <= 0 || u.lastAck == 0 {
		return false, true
	}
	wait := time.Duration(u.lastAck + int64(d) - u.d.cfg.Now())
	if wait <= 0 {
		return false, true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return true, false
	case <-t.C:
		return true, true
	}
}

// wrote notes a writing transaction acknowledged just now and, when the
// run waits for its users' own writes, takes the commit position after it
// at its source: one more query there, which the write's latency counts
// (what the remedy costs the application's write path).
func (u *user) wrote(ctx context.Context, ut *userType) {
	d := u.d
	if f := d.cfg.Fence; f != nil && ut.c != nil {
		var pos string
		var err error
		if ut.c.conn != nil {
			pos, err = f.CommitPosition(ctx, ut.c.conn)
		} else {
			pos, err = f.CommitPosition(ctx, ut.c.db)
		}
		if err != nil {
			d.fenceErrors.Add(1)
			msg := fmt.Sprintf("commit position after a write at %s: %v", ut.c.node, err)
			d.fenceErr.CompareAndSwap(nil, &msg)
		} else {
			u.lastPos = pos
		}
	}
	u.lastAck = d.cfg.Now()
}

// waitOwnWrites makes a read of a type that waits for its user's own
// writes wait, at its node, until the user's last write's position is
// applied there.
func (u *user) waitOwnWrites(ctx context.Context, ut *userType) error {
	d := u.d
	f := d.cfg.Fence
	if f == nil || !ut.t.WaitOwnWrites || u.lastPos == "" || ut.c == nil {
		return nil
	}
	timeout := d.cfg.FenceTimeout
	if timeout <= 0 {
		timeout = DefaultFenceTimeout
	}
	var err error
	if ut.c.conn != nil {
		err = f.WaitApplied(ctx, ut.c.conn, u.lastPos, timeout)
	} else {
		err = f.WaitApplied(ctx, ut.c.db, u.lastPos, timeout)
	}
	if err != nil {
		return fmt.Errorf("wait for the user's own writes at %s: %w", ut.c.node, err)
	}
	return nil
}
