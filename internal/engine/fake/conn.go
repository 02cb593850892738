package fake

import (
	"context"
	"database/sql/driver"
	"io"
	"sync/atomic"
	"time"
)

// The fake's database/sql driver: a connector per node (sql.OpenDB, no
// global registration), connections that run statements against the
// node's store, transactions that keep their writes apart until COMMIT.

type connector struct{ n *node }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	if c.n.down.Load() {
		return nil, errDown(c.n)
	}
	return &conn{n: c.n}, nil
}

func (c connector) Driver() driver.Driver { return drv{} }

type drv struct{}

func (drv) Open(string) (driver.Conn, error) {
	return nil, sqlErr("08001", "fake engine: open connections with sql.OpenDB")
}

type conn struct {
	n  *node
	tx *tx
	// last is the origin seq of the connection's last commit: its
	// position (positions.go).
	last atomic.Int64
}

var (
	_ driver.ExecerContext  = (*conn)(nil)
	_ driver.QueryerContext = (*conn)(nil)
	_ driver.ConnBeginTx    = (*conn)(nil)
)

func (c *conn) Prepare(q string) (driver.Stmt, error) {
	s, err := parse(q)
	if err != nil {
		return nil, err
	}
	return &pstmt{c: c, s: s}, nil
}

func (c *conn) Close() error { return nil }

func (c *conn) Begin() (driver.Tx, error) { return c.BeginTx(context.Background(), driver.TxOptions{}) }

func (c *conn) BeginTx(ctx context.Context, _ driver.TxOptions) (driver.Tx, error) {
	if c.n.down.Load() {
		return nil, errDown(c.n)
	}
	c.tx = &tx{c: c, overlay: map[string]map[string][]driver.Value{}}
	return c.tx, nil
}

func (c *conn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	s, err := parse(q)
	if err != nil {
		return nil, err
	}
	return (&pstmt{c: c, s: s}).ExecContext(ctx, args)
}

func (c *conn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	s, err := parse(q)
	if err != nil {
		return nil, err
	}
	return (&pstmt{c: c, s: s}).QueryContext(ctx, args)
}

// run runs a statement in the connection's transaction, or in one of its
// own that commits at once.
func (c *conn) run(s *stmt, args []driver.NamedValue) (int64, []string, [][]driver.Value, error) {
	if c.n.down.Load() {
		return 0, nil, nil, errDown(c.n)
	}
	vals := make([]driver.Value, len(args))
	for i, a := range args {
		vals[i] = a.Value
	}
	if c.tx != nil {
		c.n.mu.Lock()
		defer c.n.mu.Unlock()
		v := &view{st: c.n.st, overlay: c.tx.overlay, ops: c.tx.ops}
		aff, cols, rows, err := v.exec(s, vals)
		c.tx.ops = v.ops
		if err != nil {
			c.tx.failed = err
		}
		return aff, cols, rows, err
	}
	t := &tx{c: c, overlay: map[string]map[string][]driver.Value{}}
	c.tx = t
	aff, cols, rows, err := c.run(s, args)
	c.tx = nil
	if err != nil {
		return 0, nil, nil, err
	}
	if err := t.commit(); err != nil {
		return 0, nil, nil, err
	}
	return aff, cols, rows, nil
}

type tx struct {
	c       *conn
	overlay map[string]map[string][]driver.Value
	ops     []rowOp
	failed  error
}

// Commit makes the writes visible at once at the node and queues them for
// its replicas. At a source, the injected errors of the scheme fire here.
func (t *tx) Commit() error {
	t.c.tx = nil
	if err := t.c.n.waitPaused(context.Background()); err != nil {
		return err
	}
	return t.commit()
}

func (t *tx) commit() error {
	n := t.c.n
	if t.failed != nil {
		return sqlErr("25P02", "fake engine: current transaction is aborted")
	}
	if len(t.ops) == 0 {
		return nil
	}
	if n.down.Load() {
		return errDown(n)
	}
	if n.writable {
		k := n.c.commits.Add(1)
		p := n.c.plan
		switch {
		case p.failEvery > 0 && k%p.failEvery == 0:
			return sqlErr("XX000", "fake engine: injected failure (fail_every = %d)", p.failEvery)
		case p.conflictEvery > 0 && k%p.conflictEvery == 0:
			return sqlErr("40001", "fake engine: could not serialize access (conflict_every = %d)", p.conflictEvery)
		}
		if p.commitTime > 0 {
			n.serial.Lock()
			time.Sleep(p.commitTime)
			n.serial.Unlock()
		}
	}
	n.mu.Lock()
	n.commitLocked(t.ops)
	t.c.last.Store(n.seq)
	n.mu.Unlock()
	return nil
}

func (t *tx) Rollback() error {
	t.c.tx = nil
	return nil
}

type pstmt struct {
	c *conn
	s *stmt
}

var (
	_ driver.StmtExecContext  = (*pstmt)(nil)
	_ driver.StmtQueryContext = (*pstmt)(nil)
)

func (p *pstmt) Close() error  { return nil }
func (p *pstmt) NumInput() int { return -1 }

func (p *pstmt) Exec(args []driver.Value) (driver.Result, error) {
	return p.ExecContext(context.Background(), named(args))
}

func (p *pstmt) Query(args []driver.Value) (driver.Rows, error) {
	return p.QueryContext(context.Background(), named(args))
}

func (p *pstmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := p.c.n.waitPaused(ctx); err != nil {
		return nil, err
	}
	aff, _, _, err := p.c.run(p.s, args)
	if err != nil {
		return nil, err
	}
	return driver.RowsAffected(aff), nil
}

func (p *pstmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := p.c.n.waitPaused(ctx); err != nil {
		return nil, err
	}
	_, cols, rows, err := p.c.run(p.s, args)
	if err != nil {
		return nil, err
	}
	return &resultRows{cols: cols, rows: rows}, nil
}

func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, a := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return out
}

type resultRows struct {
	cols []string
	rows [][]driver.Value
	i    int
}

func (r *resultRows) Columns() []string { return r.cols }
func (r *resultRows) Close() error      { return nil }

func (r *resultRows) Next(dest []driver.Value) error {
	if r.i >= len(r.rows) {
		return io.EOF
	}
	copy(dest, r.rows[r.i])
	r.i++
	return nil
}
