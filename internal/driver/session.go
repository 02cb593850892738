package driver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/workload"
)

// user is one closed-loop user, or one open-loop worker: its own
// connections (per pool its transaction types use: one for its pipelined
// types, one for the others), prepared statements and random source.
type user struct {
	d     *run
	id    int
	pools Pools
	conns []*userConn // one per pool, in the order the types name them
	types []*userType // per transaction type
	j     LagJournal
	pj    PositionJournal // positions.go
	r     *rand.Rand
	n     int64 // writing transactions started, for the lag sample

	ackSeq int64    // the last acknowledged-commits journal seq given out
	acks   UserAcks // outcomes of the journalled transactions

	// Reads after writes (readafter.go): when the user's last writing
	// transaction was acknowledged (cfg.Now's clock; 0: none yet), and
	// the commit position taken after it (Config.Fence; "" when none).
	lastAck int64
	lastPos string

	// The types the user runs (groups.go): mine are they, runs[i] the
	// index in the run's types of mine[i]; nil runs: every type.
	mine []workload.TxType
	runs []int

	// The history (history.go): the user's process number now, the
	// recorder its attempts get, and a buffer for the micro-operations of
	// an attempt that did not commit.
	proc int
	hrec workload.Recorder
	hbuf []history.Mop

	// Reconnection backoff (lost): the next reconnection waits until
	// retryAt (cfg.Now's clock); backoff is the wait after the next
	// failure, 0 once a transaction reached the server. tries counts the
	// failures since (Pools).
	backoff time.Duration
	retryAt int64
	tries   int

	// The pipelined transaction being sent, and u.markSent as a func
	// made once (a closure per transaction showed in the profile).
	sending    sending
	beforeSend func()
}

// sending is the attempt being sent (every attempt resets it): for the
// lag journal, and for the history's outcome (history.go) whether its
// COMMIT was sent and whether it committed.
type sending struct {
	seq       int64 // its lag stamp; 0 when untracked
	pos       bool  // the position journal follows it
	measured  bool
	sent      bool
	committed bool
	// at is when the COMMIT was sent (cfg.Now's clock), for the
	// history's commit_ns; 0 when not known.
	at int64
}

// markSent is Pipe.Run's beforeSend: the COMMIT is about to leave.
func (u *user) markSent() {
	u.sending.sent = true
	u.sending.at = u.d.cfg.Now()
	if u.sending.seq > 0 {
		u.j.Sending(u.sending.seq, u.sending.at, u.sending.measured)
	}
	if u.sending.pos {
		u.pj.Sending(u.sending.at)
	}
}

// userConn is what a user holds of one pool.
type userConn struct {
	db      *sql.DB
	conn    *sql.Conn   // for the types run statement by statement; nil if none
	lag     *sql.Stmt   // the lag stamp there, where writing types run
	ackStmt *sql.Stmt   // the acknowledged-commits journal's insert there
	pipe    engine.Pipe // the pool's pipelined types'; nil if none
	// node is the node the connection reached (Config.ConnNode), or the
	// node behind db (Config.NodeOf); "" when unknown. The history and the
	// HA journal name it.
	node string
	// down: the connection broke (or a reconnection failed) and was
	// dropped; the user reconnects before its next transaction here.
	down bool

	// pos reads the last commit's position on conn (Config.Positions);
	// nil: unknown.
	pos func() int64
}

// userType is a transaction type as one user runs it: statement by
// statement through database/sql, or pipelined through the engine's Pipe.
type userType struct {
	t     *workload.TxType
	c     *userConn
	stmts map[string]*sql.Stmt

	pipe  engine.Pipe
	auto  engine.AutocommitPipe // the same pipe, for an Autocommit type
	index map[string]int        // statement name → the pipe's statement
	lag   int                   // the pipe's lag statement; -1 without one
	jrn   int                   // the pipe's acknowledged-commits insert; -1 without one
	calls []engine.PipeCall
	rows  []int64
	// scratch is the type's Batch's memory for this user (the driver
	// sends each batch before it asks for the next).
	scratch workload.Scratch
}

func (d *run) newUser(ctx context.Context, id int, pools Pools) (_ *user, err error) {
	u := &user{d: d, id: id, proc: id, pools: pools, r: rand.New(rand.NewPCG(uint64(d.cfg.Seed), uint64(id)+1))}
	defer func() {
		if err != nil {
			u.close()
		}
	}()
	byDB := map[*sql.DB]*userConn{}
	if d.cfg.Runs != nil {
		for i := range d.types {
			if d.cfg.Runs(id, &d.types[i]) {
				u.mine, u.runs = append(u.mine, d.types[i]), append(u.runs, i)
			}
		}
		if len(u.runs) == 0 {
			return nil, fmt.Errorf("user %d runs none of the workload's transaction types", id)
		}
	}
	for i := range d.types {
		t := &d.types[i]
		if t.Op != nil {
			u.types = append(u.types, &userType{t: t, lag: -1, jrn: -1}) // the workload holds its connections
			continue
		}
		if u.runs != nil && !slices.Contains(u.runs, i) {
			u.types = append(u.types, &userType{t: t, lag: -1, jrn: -1}) // never run by this user
			continue
		}
		at := t.At
		if d.cfg.Place != nil {
			at = d.cfg.Place(id, t)
		}
		db, err := pools(id, 0, at)
		if err != nil {
			return nil, fmt.Errorf("user %d: transaction %s: %w", id, t.Name, err)
		}
		c := byDB[db]
		if c == nil {
			c = &userConn{db: db}
			byDB[db] = c
			u.conns = append(u.conns, c) // in the types' order
		}
		u.types = append(u.types, &userType{t: t, c: c, lag: -1, jrn: -1})
	}
	for _, c := range u.conns {
		if err := u.connectAtStart(ctx, c); err != nil {
			return nil, fmt.Errorf("user %d: %w", id, err)
		}
	}
	if d.cfg.Lag != nil {
		u.j = d.cfg.Lag(id)
	}
	if d.cfg.LagPositions != nil {
		u.pj = d.cfg.LagPositions(id)
	}
	u.beforeSend = u.markSent
	return u, nil
}

// defaultStartRetry is Config.StartRetry's default: longer than a route's
// health check takes to mark a server down and up again (HAProxy's fall
// and rise at a few seconds each).
const defaultStartRetry = 10 * time.Second

// connectAtStart connects c before the run starts. A connection lost while
// it is being made — a route whose health check cuts the primary's
// connections for a moment as the users connect, a node restarting — is
// made again as a reconnection is (backoff up to a second, Pools asked
// again with one more try) for up to Config.StartRetry; any other error ends
// the run at once, and a connection still lost then ends it too.
func (u *user) connectAtStart(ctx context.Context, c *userConn) error {
	err := u.connect(ctx, c)
	if err == nil || !connLost(err) {
		return err
	}
	first := err
	retry := u.d.cfg.StartRetry
	if retry <= 0 {
		retry = defaultStartRetry
	}
	deadline := time.Now().Add(retry)
	for err != nil && connLost(err) && time.Now().Before(deadline) && ctx.Err() == nil {
		c.drop()
		u.lost()
		err = u.reconnect(ctx, c)
	}
	if err != nil && connLost(err) {
		return fmt.Errorf("connection lost as it was made, and not made again within %s: %w (first: %v)", retry, err, first)
	}
	return err
}

// connect gives the user c's connection from c.db, as newUser does and
// as a reconnection does: the pipe of its pipelined types, a connection
// for the others, their statements and the lag stamp prepared there.
// What an earlier connection left in c and its types is forgotten (drop
// closes it first). On error c is left half made: drop it.
func (u *user) connect(ctx context.Context, c *userConn) (err error) {
	d := u.d
	for _, ut := range u.types {
		if ut.c == c {
			ut.pipe, ut.auto, ut.index, ut.lag, ut.jrn, ut.stmts = nil, nil, nil, -1, -1, nil
		}
	}
	c.conn, c.lag, c.ackStmt, c.pipe, c.pos = nil, nil, nil, nil, nil
	// The node behind the pool (NodeOf), unless the connection itself says
	// which server it reached (ConnNode: a route that moves between nodes).
	c.node = ""
	if d.cfg.NodeOf != nil {
		c.node = d.cfg.NodeOf(c.db)
	}
	connNode := false
	if d.cfg.Pipeliner != nil && !d.cfg.NoPipeline {
		if err := d.pipe(ctx, c, u.types); err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		if c.pipe != nil && d.cfg.ConnNode != nil {
			if n := d.cfg.ConnNode(c.pipe); n != "" {
				c.node, connNode = n, true
			}
		}
	}
	var session []string // run on c.conn
	for _, ut := range u.types {
		if ut.c != c || ut.pipe != nil {
			continue
		}
		t := ut.t
		if c.conn == nil {
			if c.conn, err = c.db.Conn(ctx); err != nil {
				return fmt.Errorf("connect: %w", err)
			}
			if d.cfg.ConnNode != nil && !connNode {
				_ = c.conn.Raw(func(dc any) error {
					if n := d.cfg.ConnNode(dc); n != "" {
						c.node = n
					}
					return nil
				})
			}
			if err := d.sessionPositions(ctx, c); err != nil {
				return err
			}
		}
		for _, q := range t.Session {
			if slices.Contains(session, q) {
				continue // another type on this connection ran it
			}
			if _, err := c.conn.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: session statement %q: %w", t.Name, q, err)
			}
			session = append(session, q)
		}
		ut.stmts = map[string]*sql.Stmt{}
		for _, st := range t.Statements {
			ps, err := c.conn.PrepareContext(ctx, st.SQL)
			if err != nil {
				return fmt.Errorf("prepare %s of %s: %w", st.Name, t.Name, err)
			}
			ut.stmts[st.Name] = ps
		}
		if d.cfg.Lag != nil && !t.ReadOnly && c.lag == nil {
			if c.lag, err = c.conn.PrepareContext(ctx, d.cfg.LagStatement); err != nil {
				return fmt.Errorf("prepare lag update: %w", err)
			}
		}
		if d.cfg.AckStatement != "" && !t.ReadOnly && c.ackStmt == nil {
			if c.ackStmt, err = c.conn.PrepareContext(ctx, d.cfg.AckStatement); err != nil {
				return fmt.Errorf("prepare the acknowledged-commits insert: %w", err)
			}
		}
	}
	return nil
}

// pipe gives the types on c that have a Batch one engine Pipe, with
// their statements and, when one of them writes, the lag stamp. Types
// whose connection cannot pipeline are left to run statement by
// statement.
func (d *run) pipe(ctx context.Context, c *userConn, types []*userType) error {
	var mine []*userType
	var sqls []string
	lag, jrn := -1, -1
	for _, ut := range types {
		if ut.c != c || ut.t.Batch == nil || len(ut.t.Session) > 0 {
			continue // a pipe runs no session statements
		}
		ut.index = map[string]int{}
		for _, st := range ut.t.Statements {
			ut.index[st.Name] = len(sqls)
			sqls = append(sqls, st.SQL)
		}
		if d.cfg.Lag != nil && !ut.t.ReadOnly {
			if lag < 0 {
				lag = len(sqls)
				sqls = append(sqls, d.cfg.LagStatement)
			}
			ut.lag = lag
		}
		if d.cfg.AckStatement != "" && !ut.t.ReadOnly {
			if jrn < 0 {
				jrn = len(sqls)
				sqls = append(sqls, d.cfg.AckStatement)
			}
			ut.jrn = jrn
		}
		mine = append(mine, ut)
	}
	if len(mine) == 0 {
		return nil
	}
	p, err := d.cfg.Pipeliner.Pipe(ctx, c.db, sqls)
	if errors.Is(err, engine.ErrNoPipeline) {
		return nil
	}
	if err != nil {
		return err
	}
	auto, _ := p.(engine.AutocommitPipe)
	used := false
	for _, ut := range mine {
		if autocommit(ut.t) {
			if auto == nil {
				continue // statement by statement, without BEGIN
			}
			ut.auto = auto
		}
		ut.pipe, used = p, true
	}
	if !used {
		return p.Close()
	}
	c.pipe = p
	return nil
}

func (u *user) close() {
	if u == nil {
		return
	}
	for _, c := range u.conns {
		c.close(false)
	}
}

// do runs one transaction (with retries) whose latency counts from
// `from` (the intended start in open loop).
func (u *user) do(ctx context.Context, from int64) {
	ti := u.pick()
	ut := u.types[ti]
	if paused, ok := u.readDelay(ctx, ut); !ok {
		return
	} else if paused {
		from = max(from, u.d.cfg.Now()) // the pause is the application's, not latency
	}
	phase := u.d.phaseAt(from)
	measured := phase == Measure
	track := false
	if u.j != nil && !ut.t.ReadOnly {
		u.n++
		every := u.d.lagEvery(phase)
		track = every <= 1 || u.n%every == 0
		if u.d.rateHalf(from) {
			track = false // the warmup's second half measures the untracked rate
		}
	}
	if c := ut.c; c != nil && c.down {
		if err := u.reconnect(ctx, c); err != nil {
			if ctx.Err() == nil {
				u.fail(ti, measured, u.d.cfg.Now(), ErrConnect, err, 0, 0)
			}
			return
		}
	}
	var retries, conflicts int64
	reconnected := false
	for attempt := 0; ; attempt++ {
		var rows int64
		var err error
		var invoke int64
		rec := u.startRecord()
		if rec != nil {
			invoke = u.d.cfg.Now()
		}
		u.sending = sending{}
		if ut.t.Op != nil {
			rows, err = u.attemptOp(ctx, ut, measured, track, rec)
		} else if ut.pipe != nil {
			rows, err = u.attemptBatch(ctx, ut, measured, track, rec)
		} else {
			rows, err = u.attempt(ctx, ut, measured, track, rec)
		}
		if err == nil && !ut.t.ReadOnly {
			u.wrote(ctx, ut)
		}
		now := u.d.cfg.Now()
		gone := err != nil && ut.c != nil && connLost(err)
		var class engine.ErrorClass
		if err != nil {
			class = u.d.cfg.Classify(err)
		}
		if rec != nil {
			u.recordAttempt(ctx, ut, rec, invoke, now, err, class)
		}
		if !gone && !(class.Unavailable && ut.c != nil) {
			// The server answered and served: a node that answers only
			// that it cannot serve keeps the count, so the user goes on
			// through the list (and backs off) rather than back to it.
			u.backoff, u.tries = 0, 0
		}
		if err == nil {
			u.d.rec.commit(ti, measured, now, now-from, rows, retries, conflicts)
			u.d.groups.commit(u.id, ti, measured, now-from)
			if u.d.rateHalf(now) {
				u.d.warmupCommits.Add(1)
			}
			return
		}
		if ctx.Err() != nil {
			return // shutting down: not the server's fault
		}
		if c := ut.c; gone {
			// The connection is gone (see reconnect.go for what is
			// retried and why).
			c.drop()
			u.lost()
			if unsent(err) && !reconnected {
				reconnected = true
				rerr := u.reconnect(ctx, c)
				if rerr == nil {
					continue
				}
				if ctx.Err() != nil {
					return
				}
				u.fail(ti, measured, u.d.cfg.Now(), ErrConnect, rerr, retries, conflicts)
				return
			}
			if class.Code == "" || class.Code == "other" {
				class.Code = ErrConnection
			}
			u.fail(ti, measured, now, class.Code, err, retries, conflicts)
			return
		}
		if class.Unavailable && ut.c != nil {
			// The node cannot serve now: go to another one for the next
			// transaction, as a client with a list of nodes would.
			ut.c.drop()
			u.lost()
			u.fail(ti, measured, now, class.Code, err, retries, conflicts)
			return
		}
		if class.Conflict {
			conflicts++
		}
		if class.Retry && attempt < u.d.cfg.MaxRetries {
			retries++
			continue
		}
		u.fail(ti, measured, now, class.Code, err, retries, conflicts)
		return
	}
}

// stamp starts a tracked transaction's lag record: its seq, or 0 when the
// transaction is not tracked.
func (u *user) stamp(track bool) int64 {
	if !track || u.j == nil {
		return 0
	}
	return u.j.Next()
}

// attemptOp runs an operation that is not SQL once; one that writes and is
// tracked carries the lag stamp in its commit (workload.OpCall).
func (u *user) attemptOp(ctx context.Context, ut *userType, measured, track bool, rec *workload.Recorder) (int64, error) {
	call := workload.OpCall{User: u.id, Rec: rec}
	if !ut.t.ReadOnly {
		seq := u.stamp(track)
		if seq > 0 || rec != nil {
			call.Seq = seq
			call.Sending = func() {
				u.sending.at = u.d.cfg.Now()
				if seq > 0 {
					u.j.Sending(seq, u.sending.at, measured)
				}
			}
		}
	}
	u.sending.sent = true // whether the commit left is the Op's to know
	rows, err := ut.t.Op(ctx, call, u.r)
	if call.Seq > 0 {
		u.j.Done(call.Seq, err == nil)
	}
	return rows, err
}

// autocommit: the type runs without BEGIN and COMMIT (read-only ones only).
func autocommit(t *workload.TxType) bool { return t.Autocommit && t.ReadOnly }

// attempt runs the transaction once, statement by statement; a tracked
// one adds the lag probe's update before its COMMIT.
func (u *user) attempt(ctx context.Context, ut *userType, measured, track bool, rec *workload.Recorder) (int64, error) {
	if err := u.waitOwnWrites(ctx, ut); err != nil {
		return 0, err
	}
	if autocommit(ut.t) {
		u.sending.sent = true // each statement commits on its own
		t := workload.NewTx(u.id, nil, ut.stmts)
		t.Rec = rec
		return ut.t.Run(ctx, t, u.r) // read-only: never tracked
	}
	seq := u.stamp(track)
	tx, err := ut.c.conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	t := workload.NewTx(u.id, tx, ut.stmts)
	t.Rec = rec
	rows, err := ut.t.Run(ctx, t, u.r)
	if err == nil && seq > 0 {
		var res sql.Result
		if res, err = tx.StmtContext(ctx, ut.c.lag).ExecContext(ctx, seq, u.id); err == nil {
			// A missing lag row would make this transaction invisible to
			// the probe for ever: fail loudly instead.
			if n, rerr := res.RowsAffected(); rerr == nil && n != 1 {
				err = u.lagRowErr(n)
			}
		}
	}
	ackSeq := u.ackSeqOf(ut)
	if err == nil && ackSeq > 0 {
		var res sql.Result
		if res, err = tx.StmtContext(ctx, ut.c.ackStmt).ExecContext(ctx, ackSeq, u.d.cfg.AckWriterBase+u.id); err == nil {
			if n, rerr := res.RowsAffected(); rerr == nil && n != 1 {
				err = fmt.Errorf("acknowledged-commits journal insert changed %d rows, want 1", n)
			}
		}
	}
	if err != nil {
		_ = tx.Rollback()
		if seq > 0 {
			u.j.Done(seq, false)
		}
		return 0, err
	}
	follow := u.follows(ut)
	u.sending.at = u.d.cfg.Now()
	if seq > 0 {
		u.j.Sending(seq, u.sending.at, measured)
	}
	if follow {
		u.pj.Sending(u.sending.at)
	}
	u.sending.sent = true
	err = tx.Commit()
	u.sending.committed = err == nil
	if seq > 0 {
		u.j.Done(seq, err == nil)
	}
	if follow {
		u.pj.Done(err == nil, ut.c.commitPosition(err), measured)
	}
	u.ackOutcome(ackSeq, true, err, ut.c.node)
	if err != nil {
		return 0, err
	}
	return rows, nil
}

// ackSeqOf gives a writing transaction its journal seq; 0 without a
// journal.
func (u *user) ackSeqOf(ut *userType) int64 {
	if u.d.cfg.AckStatement == "" || ut.t.ReadOnly {
		return 0
	}
	u.ackSeq++
	return u.ackSeq
}

// ackOutcome records what became of journalled transaction ackSeq once
// its COMMIT was sent (sent): acknowledged when it returned no error,
// unknown otherwise — an error after the COMMIT left may hide a commit
// that landed (the connection broke before the answer).
func (u *user) ackOutcome(ackSeq int64, sent bool, err error, node string) {
	if ackSeq == 0 || !sent {
		return
	}
	if err == nil {
		u.acks.Acked = append(u.acks.Acked, ackSeq)
		if u.d.cfg.ConnNode != nil {
			u.acks.AckedNs = append(u.acks.AckedNs, u.d.cfg.Now()-u.d.start)
			if node != "" {
				u.ackedAt(node)
			}
		}
	} else {
		u.acks.Unknown = append(u.acks.Unknown, ackSeq)
	}
}

// ackedAt records that node acknowledged the user's last acknowledged
// commit, now: it extends the last span, or starts one.
func (u *user) ackedAt(node string) {
	i := len(u.acks.Acked) - 1
	now := u.acks.AckedNs[i]
	if k := len(u.acks.Spans) - 1; k >= 0 && u.acks.Spans[k].Node == node && u.acks.Spans[k].To == i {
		u.acks.Spans[k].To, u.acks.Spans[k].LastNs = i+1, now
		return
	}
	u.acks.Spans = append(u.acks.Spans, AckSpan{Node: node, From: i, To: i + 1, FirstNs: now, LastNs: now})
}

// attemptBatch runs a transaction type that has a Batch as one pipeline:
// BEGIN, its statements, the lag probe's update and COMMIT leave in one
// write and their results come back together — one round trip where the
// statement-by-statement path needs one per statement, as a client that
// pipelines would. The COMMIT is sent with the rest, so the lag journal
// records it as sent just before the write.
func (u *user) attemptBatch(ctx context.Context, ut *userType, measured, track bool, rec *workload.Recorder) (int64, error) {
	if err := u.waitOwnWrites(ctx, ut); err != nil {
		return 0, err
	}
	ut.scratch.Rec = rec
	calls := ut.t.Batch(u.id, u.r, &ut.scratch)
	pc := ut.calls[:0]
	for _, cl := range calls {
		if cl.Err != nil {
			return 0, fmt.Errorf("%s: %w", ut.t.Name, cl.Err)
		}
		i, ok := ut.index[cl.Stmt]
		if !ok {
			return 0, fmt.Errorf("%s: batch names no statement %q", ut.t.Name, cl.Stmt)
		}
		pc = append(pc, engine.PipeCall{Stmt: i, Args: cl.Args})
	}
	seq := u.stamp(track)
	if seq > 0 {
		pc = append(pc, engine.PipeCall{Stmt: ut.lag, Args: []any{seq, u.id}})
	}
	var ackSeq int64
	if ut.jrn >= 0 {
		ackSeq = u.ackSeqOf(ut)
		pc = append(pc, engine.PipeCall{Stmt: ut.jrn, Args: []any{ackSeq, u.d.cfg.AckWriterBase + u.id}})
	}
	ut.calls = pc
	if cap(ut.rows) < len(pc) {
		ut.rows = make([]int64, len(pc))
	}
	counts := ut.rows[:len(pc)]
	u.sending = sending{seq: seq, measured: measured, pos: ut.auto == nil && u.follows(ut)}
	var err error
	var pos int64
	if ut.auto != nil {
		err = ut.auto.RunAutocommit(ctx, pc, u.beforeSend, counts) // read-only: never tracked
	} else {
		pos, err = runPipe(ctx, ut.pipe, u.sending.pos, pc, u.beforeSend, counts)
	}
	u.sending.committed = u.sending.sent && err == nil
	if seq > 0 {
		u.j.Done(seq, u.sending.committed)
	}
	if u.sending.pos {
		u.pj.Done(u.sending.committed, pos, measured)
	}
	u.ackOutcome(ackSeq, u.sending.sent, err, ut.c.node)
	if err != nil {
		return 0, err
	}
	// The transaction committed; a wrong count is still an error (the
	// workload's check), counted against a committed transaction.
	var rows int64
	for i, cl := range calls {
		rows += counts[i]
		if cl.Rows >= 0 && counts[i] != cl.Rows {
			return 0, fmt.Errorf("%s: %d rows changed, want %d", ut.t.Name, counts[i], cl.Rows)
		}
	}
	if seq > 0 && counts[len(calls)] != 1 {
		return 0, u.lagRowErr(counts[len(calls)])
	}
	if ackSeq > 0 && counts[len(pc)-1] != 1 {
		return 0, fmt.Errorf("acknowledged-commits journal insert changed %d rows, want 1", counts[len(pc)-1])
	}
	return rows, nil
}

func (u *user) lagRowErr(n int64) error {
	return fmt.Errorf("lag probe row of writer %d changed %d rows, want 1 (was the lag table seeded?)", u.id, n)
}
