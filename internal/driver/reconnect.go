package driver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// When the server behind a user's connection goes away (a node killed,
// stopped, restarted), the user does what a real client does: it drops
// the connection and makes a new one from the same pool before its next
// transaction, asking Pools again for the pool (so a Pools that knows
// of a failover could send it elsewhere). While the node is down each
// reconnection fails; the transaction that needed it is counted as an
// error of its type with code ErrConnect, and the user backs off between
// attempts (see lost) so a down node costs a user about one attempt a
// second, not a spinning CPU.
//
// Retries: a transaction whose connection broke is not retried as a
// serialization failure is (MaxRetries): once anything of it was sent its
// outcome is unknown (the COMMIT may have been applied before the
// connection dropped), and running it again could apply it twice. It is
// an error, ErrConnection unless the engine's Classify gave it a code of
// its own (a server's "terminating connection" keeps its SQLSTATE). Only
// when the connection was found dead before anything was sent
// (driver.ErrBadConn, sql.ErrConnDone, a pipe already closed) is the
// transaction run again, once, on a fresh connection, if the
// reconnection succeeds at once; neither counts as a retry.

// Error codes (TypeResult.Errors) of a lost connection.
const (
	// ErrConnect: the user's connection was gone and making a new one
	// failed (the node was down); the transaction was not sent.
	ErrConnect = "connect"
	// ErrConnection: the connection broke during the transaction.
	ErrConnection = "connection"
)

const (
	reconnectMin = 50 * time.Millisecond
	reconnectMax = time.Second
)

// connLost reports whether err says the connection is unusable (rather
// than an error the server sent on a connection that still works).
func connLost(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, sql.ErrConnDone),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, net.ErrClosed), errors.As(err, &ne):
		return true
	}
	return unsent(err) || strings.Contains(err.Error(), "server closed the connection")
}

// unsent reports whether err says the connection was found dead before
// anything of the attempt was sent: database/sql's ErrBadConn contract,
// a *sql.Conn that database/sql closed after one, an error that says it
// is safe to retry (pgx's, for a connection it had already seen die, as
// when a COMMIT follows a statement that lost the connection), or a pipe
// that an earlier error closed (engine.Pipe: "later runs fail"; the
// PostgreSQL pipe says "pipeline connection closed"). The ctx ending is
// the caller's to check first.
func unsent(err error) bool {
	var safe interface{ SafeToRetry() bool } // pgconn's errors: "conn closed" before sending
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.As(err, &safe) && safe.SafeToRetry() ||
		strings.Contains(err.Error(), "pipeline connection closed")
}

// drop closes c's connection and pipe; the user reconnects before using
// it again. The connection does not go back to the pool, where the next
// reconnection would find it again: database/sql discards a connection
// that Raw says is bad.
func (c *userConn) drop() {
	c.close(true)
	c.down = true
}

// close closes c's pipe and connection; discard keeps the connection out
// of the pool (at the end of a run a working one goes back).
func (c *userConn) close(discard bool) {
	if c.pipe != nil {
		_ = c.pipe.Close()
	}
	if c.conn != nil {
		if discard {
			_ = c.conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = c.conn.Close() // its statements with it
	}
	c.conn, c.lag, c.pipe = nil, nil, nil
}

// lost: a connection of the user broke, or a reconnection failed. The
// first reconnection after a working spell goes at once (a backend that
// was killed on a server that is still up is back in a round trip); each
// further one waits twice as long as the last, from reconnectMin up to
// reconnectMax. Only a transaction that reaches the server (commits, or
// fails with the server's error) resets it: a reconnection that succeeds
// is not enough, since a pool may hand out a connection that is just as
// dead, and a user would otherwise cycle between the two at full speed.
func (u *user) lost() {
	u.retryAt = u.d.cfg.Now() + int64(u.backoff)
	u.backoff = min(max(2*u.backoff, reconnectMin), reconnectMax)
	u.tries++
}

// reconnect waits out the backoff (ending early with ctx, and at the end
// of the run's phases) and connects c again, through Pools. On failure
// c stays down and the next wait doubles.
func (u *user) reconnect(ctx context.Context, c *userConn) error {
	until := u.retryAt
	if end := u.d.end.Load(); end > 0 {
		until = min(until, end)
	}
	if wait := time.Duration(until - u.d.cfg.Now()); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	err := u.repool(c)
	if err == nil {
		if err = u.connect(ctx, c); err != nil {
			c.drop()
		}
	}
	if err != nil {
		u.lost()
		return fmt.Errorf("reconnect: %w", err)
	}
	c.down = false
	if u.d.phaseAt(u.d.cfg.Now()) == Measure {
		u.d.reconnects.Add(1)
	}
	return nil
}

// repool asks Pools again for c's pool: every type on c must still
// be sent to one pool.
func (u *user) repool(c *userConn) error {
	var db *sql.DB
	for _, ut := range u.types {
		if ut.c != c {
			continue
		}
		got, err := u.pools(u.id, u.tries, ut.t.At)
		if err != nil {
			return fmt.Errorf("transaction %s: %w", ut.t.Name, err)
		}
		if db != nil && got != db {
			return fmt.Errorf("transaction %s: its pool is no longer the one of the other types on its connection", ut.t.Name)
		}
		db = got
	}
	if db != nil {
		c.db = db
	}
	return nil
}
