// Package pgpipe sends a PostgreSQL transaction in one round trip over a
// connection taken out of a database/sql pool of pgx's stdlib driver: the
// lab's PostgreSQL engine and target mode both pipeline through it.
package pgpipe

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sys/unix"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// Open is engine.Pipeliner's Pipe for PostgreSQL. It takes a connection
// out of db's pool (pgx's stdlib driver), prepares BEGIN, COMMIT,
// ROLLBACK and stmts there (named server-side statements, once), and takes
// its socket over from pgx, as the lag reader does. Each Run then writes
// Bind/Execute of each statement and one Sync in one write(2) (an
// implicit transaction, or BEGIN … COMMIT: see encode), and reads the
// replies with blocking read(2) on the caller's thread. Through a pgx batch a pipelined
// transaction cost this process about 33 µs of CPU on this 2-core machine,
// half of it in handing the goroutine between the netpoller and OS
// threads: the server's reply is ~70 µs away, so the goroutine always
// parked. A thread asleep in read(2) until the reply is there costs a
// fraction, and a socket out of the netpoller wakes no other thread.
func Open(ctx context.Context, db *sql.DB, stmts []string) (engine.Pipe, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	p := &pipe{fd: -1}
	err = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return engine.ErrNoPipeline
		}
		pc := sc.Conn().PgConn()
		if _, ok := pc.Conn().(syscall.Conn); !ok { // TLS
			return engine.ErrNoPipeline
		}
		p.remote = pc.Conn().RemoteAddr()
		all := append([]string{"BEGIN", "COMMIT", "ROLLBACK"}, stmts...)
		for i, q := range all {
			sd, err := pc.Prepare(ctx, pipeStmtName+strconv.Itoa(i), q, nil)
			if err != nil {
				return fmt.Errorf("prepare %q: %w", q, err)
			}
			p.stmts = append(p.stmts, pipeStmt{name: sd.Name, oids: sd.ParamOIDs, dml: i >= pipeBuiltin && plainDML(q)})
		}
		if err := pc.SyncConn(ctx); err != nil {
			return err
		}
		// The node behind a proxy says its name itself (replab's lab
		// servers set replab.node; others answer NULL), and the address
		// the connection reached it at.
		if res, err := pc.Exec(ctx, "SELECT current_setting('replab.node', true), host(inet_server_addr()) || ':' || inet_server_port()").ReadAll(); err == nil &&
			len(res) == 1 && len(res[0].Rows) == 1 && len(res[0].Rows[0]) == 2 {
			p.server = string(res[0].Rows[0][0])
			p.serverAddr = string(res[0].Rows[0][1])
		}
		p.lsn = lookUpInsertLSN(ctx, pc)
		if p.fd, err = TakeSocket(pc); err != nil {
			return err
		}
		// The connection is the pipe's now: database/sql forgets it.
		return badConn{errTaken}
	})
	if p.fd < 0 {
		return nil, err
	}
	p.begin = p.appendBindExecute(nil, 0)
	p.commit = p.appendBindExecute(nil, 1)
	p.rollback = append(p.appendBindExecute(nil, 2), 'S', 0, 0, 0, 4)
	p.msgs = wireMsgs{fd: p.fd, buf: make([]byte, 0, 8<<10)}
	holdProc()
	return p, nil
}

// A pipe waiting for its reply holds its OS thread and its P (Go's
// processor): a goroutine that wants to run then finds no idle P until
// sysmon takes one back, 20 µs to 10 ms later. The link emulator's
// delivery goroutines need an idle P the moment they wake (see
// emu.minProcs), so each open pipe adds one to GOMAXPROCS, up to
// maxPipeProcs above what it was when the first one opened; past that,
// waiting users share Ps through sysmon.
var pipeProcs struct {
	sync.Mutex
	base, open, set int
}

const maxPipeProcs = 32

func holdProc() {
	pipeProcs.Lock()
	defer pipeProcs.Unlock()
	if pipeProcs.open == 0 {
		pipeProcs.base = runtime.GOMAXPROCS(0)
	}
	pipeProcs.open++
	if want := pipeProcs.base + min(pipeProcs.open, maxPipeProcs); runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
		pipeProcs.set = want
	}
}

// releaseProc gives the Ps back once the last pipe closed, unless
// someone else changed GOMAXPROCS meanwhile.
func releaseProc() {
	pipeProcs.Lock()
	defer pipeProcs.Unlock()
	pipeProcs.open--
	if pipeProcs.open == 0 && pipeProcs.set != 0 {
		if runtime.GOMAXPROCS(0) == pipeProcs.set {
			runtime.GOMAXPROCS(pipeProcs.base)
		}
		pipeProcs.set = 0
	}
}

// pipeStmtName prefixes the pipe's prepared statements: its connection
// is its own, so the names need only differ from each other.
const pipeStmtName = "replab_pipe_"

// pipeBuiltin is how many statements Pipe prepares before the caller's.
const pipeBuiltin = 3

// pipeYield is how often Run passes through the scheduler: well under
// the runtime's 10 ms (forcePreemptNS).
const pipeYield = 8 * time.Millisecond

var errTaken = errors.New("connection taken over for pipelining")

// pipe is one connection's pipelined transactions; one goroutine uses it.
type pipe struct {
	fd     int      // -1 once closed
	broken error    // why the connection was closed
	remote net.Addr // the server's address, as the connection was made
	server string   // the server's replab.node, "" when it has none
	// serverAddr is the address the server says the connection reached
	// ("198.18.0.2:5432"; "" over a unix socket): behind a proxy, the
	// server's own.
	serverAddr string
	stmts      []pipeStmt
	types      *pgtype.Map // for arguments other than strings and integers

	begin, commit, rollback []byte // encoded once
	req                     []byte
	msgs                    wireMsgs
	yielded                 time.Time // the last runtime.Gosched
	lsn                     insertLSN // RunPositioned's statement (position.go)
}

type pipeStmt struct {
	name string
	oids []uint32
	dml  bool // plainDML: may run in an implicit transaction
}

// Run implements engine.Pipe.
func (p *pipe) Run(ctx context.Context, calls []engine.PipeCall, beforeSend func(), rows []int64) error {
	return p.run(ctx, calls, beforeSend, rows, true, nil)
}

var _ engine.AutocommitPipe = (*pipe)(nil)

// RunAutocommit implements engine.AutocommitPipe: each call is followed by
// a Sync, so each is an implicit transaction of its own, as pgbench's
// statements are without BEGIN.
func (p *pipe) RunAutocommit(ctx context.Context, calls []engine.PipeCall, beforeSend func(), rows []int64) error {
	return p.run(ctx, calls, beforeSend, rows, false, nil)
}

// run sends one request: a transaction (tx) or autocommit calls. With
// pos, the transaction is positioned: between BEGIN and COMMIT, the
// position statement after the COMMIT, its answer read into pos.
func (p *pipe) run(ctx context.Context, calls []engine.PipeCall, beforeSend func(), rows []int64, tx bool, pos *int64) error {
	if p.fd < 0 {
		return fmt.Errorf("pipeline connection closed: %w", p.broken)
	}
	var after []byte
	if pos != nil {
		after = p.lsn.sel
	}
	req, implicit, err := p.encode(p.req[:0], calls, tx, after)
	if err != nil {
		return err // nothing sent
	}
	p.req = req
	if beforeSend != nil {
		beforeSend()
	}
	var runErr, ioErr error
	if tx {
		runErr, ioErr = p.exchange(ctx, rows, !implicit, pos)
	} else {
		runErr, ioErr = p.exchangeAutocommit(ctx, rows)
	}
	if now := time.Now(); now.Sub(p.yielded) > pipeYield {
		// This goroutine waits in system calls, never in the scheduler:
		// after 10 ms on one scheduling tick the runtime takes it for a
		// hog, takes its P away while it waits and signals it when it
		// runs, and sysmon polls every 20 µs instead of backing off to
		// 10 ms (~3,000 wake-ups a second with 4 users). Passing through
		// the scheduler now and then prevents all three.
		runtime.Gosched()
		p.yielded = now
	}
	if ioErr != nil {
		// Out of step with the server (or cut off): a closed connection
		// rolls back whatever was not committed.
		p.broken = ioErr
		_ = p.Close()
		if runErr == nil {
			runErr = ioErr
		}
	}
	return runErr
}

// encode appends the request for calls to req: as one transaction (tx),
// or each call a transaction of its own (Sync after each); after, when
// set, is sent after the transaction's COMMIT and before its Sync, which
// makes it a BEGIN … COMMIT transaction. A transaction
// whose statements are all plain DML (see plainDML) is sent as the
// protocol's implicit transaction — the calls and one Sync: the server
// runs everything before a Sync as one transaction and commits it there,
// or rolls it all back at the first error (libpq's pipeline mode without
// BEGIN). BEGIN and COMMIT as statements of their own cost the server
// two more Bind/Execute cycles: about 4 µs, a tenth of its CPU for personnel's
// update, one UPDATE a transaction (bench/README.md). Other transactions
// are wrapped in BEGIN and COMMIT, for statements that need a
// transaction block (LOCK, SAVEPOINT, SET LOCAL, DECLARE).
func (p *pipe) encode(req []byte, calls []engine.PipeCall, tx bool, after []byte) (_ []byte, implicit bool, err error) {
	implicit = tx && after == nil
	for _, cl := range calls {
		if i := cl.Stmt + pipeBuiltin; cl.Stmt < 0 || i >= len(p.stmts) || !p.stmts[i].dml {
			implicit = false
		}
	}
	if tx && !implicit {
		req = append(req, p.begin...)
	}
	for _, cl := range calls {
		if req, err = p.appendCall(req, cl); err != nil {
			return req, false, err
		}
		if !tx {
			req = append(req, 'S', 0, 0, 0, 4)
		}
	}
	if tx {
		if !implicit {
			req = append(req, p.commit...)
			req = append(req, after...)
		}
		req = append(req, 'S', 0, 0, 0, 4)
	}
	return req, implicit, nil
}

// plainDML says whether q's first keyword (after blanks and comments) is
// one of a statement that runs alike in an implicit transaction and in a
// BEGIN … COMMIT block.
func plainDML(q string) bool {
	for {
		q = strings.TrimLeft(q, " \t\r\n\f(")
		switch {
		case strings.HasPrefix(q, "--"):
			i := strings.IndexByte(q, '\n')
			if i < 0 {
				return false
			}
			q = q[i+1:]
			continue
		case strings.HasPrefix(q, "/*"):
			i := strings.Index(q, "*/")
			if i < 0 {
				return false
			}
			q = q[i+2:]
			continue
		}
		break
	}
	end := strings.IndexFunc(q, func(r rune) bool { return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') })
	if end < 0 {
		end = len(q)
	}
	switch strings.ToUpper(q[:end]) {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "MERGE":
		return true
	}
	return false
}

// Close implements engine.Pipe.
// RemoteAddr is the address of the server the pipe's connection reached.
func (p *pipe) RemoteAddr() net.Addr { return p.remote }

// ServerNode is the replab.node setting of the server the pipe reached
// (a lab node's name; "" elsewhere): behind a proxy, the address is the
// proxy's.
func (p *pipe) ServerNode() string { return p.server }

// ServerAddr is the address the server says the pipe's connection
// reached it at (host:port; "" over a unix socket): behind a proxy, the
// server's own address, not the proxy's.
func (p *pipe) ServerAddr() string { return p.serverAddr }

func (p *pipe) Close() error {
	if p.fd < 0 {
		return nil
	}
	_, _ = unix.Write(p.fd, []byte{'X', 0, 0, 0, 4}) // Terminate, best effort
	err := unix.Close(p.fd)
	p.fd = -1
	releaseProc()
	if p.broken == nil {
		p.broken = errors.New("closed")
	}
	return err
}

// exchange sends p.req, one transaction (with BEGIN and COMMIT of their
// own when block, else implicit), and reads the replies up to
// ReadyForQuery, then rolls back a transaction an error left open. An
// error after the calls is the commit's. runErr is the server's answer
// (an error of one statement); ioErr means the connection is unusable.
// With pos, the position statement's row after the COMMIT goes there
// (left alone when the statement failed).
func (p *pipe) exchange(ctx context.Context, rows []int64, block bool, pos *int64) (runErr, ioErr error) {
	if err := enginekit.SockWrite(ctx, p.fd, p.req); err != nil {
		return nil, err
	}
	n := 0 // replies so far: BEGIN is -1, calls 0…, COMMIT len(rows)
	if block {
		n = -1
	}
	for {
		typ, body, err := p.msgs.next(ctx)
		if err != nil {
			return runErr, err
		}
		switch typ {
		case 'C': // CommandComplete
			switch {
			case n >= 0 && n < len(rows):
				rows[n] = rowsAffected(body)
			case n == len(rows) && runErr == nil && string(cstring(body)) != "COMMIT":
				// PostgreSQL answers ROLLBACK to a COMMIT of an aborted
				// transaction.
				runErr = errors.New("transaction rolled back")
			}
			n++
		case 'I': // EmptyQueryResponse
			n++
		case 'D': // DataRow: only the position statement's
			if pos != nil && n == len(rows)+1 {
				if v, ok := p.lsn.decode(body); ok {
					*pos = v
				}
			}
		case 'E':
			if runErr == nil && n <= len(rows) {
				runErr = pipeError(body, n, len(rows))
			}
		case 'Z':
			if body[0] == 'I' {
				return runErr, nil
			}
			// A statement failed inside BEGIN: the server skipped the
			// rest up to Sync, and the transaction stays aborted until
			// ROLLBACK.
			if runErr == nil {
				runErr = fmt.Errorf("transaction status %q after COMMIT", body[0])
			}
			return runErr, p.rollBack(ctx)
		}
	}
}

// exchangeAutocommit sends p.req (calls, each with its Sync) and reads
// the replies up to the last call's ReadyForQuery; runErr is the first
// call's error.
func (p *pipe) exchangeAutocommit(ctx context.Context, rows []int64) (runErr, ioErr error) {
	if err := enginekit.SockWrite(ctx, p.fd, p.req); err != nil {
		return nil, err
	}
	for n := 0; n < len(rows); {
		typ, body, err := p.msgs.next(ctx)
		if err != nil {
			return runErr, err
		}
		switch typ {
		case 'C': // CommandComplete
			rows[n] = rowsAffected(body)
		case 'E':
			if runErr == nil {
				runErr = pipeError(body, n, len(rows))
			}
		case 'Z':
			n++
		}
	}
	return runErr, nil
}

// rollBack ends an aborted transaction: one more round trip, on errors
// only.
func (p *pipe) rollBack(ctx context.Context) error {
	if err := enginekit.SockWrite(ctx, p.fd, p.rollback); err != nil {
		return err
	}
	for {
		typ, body, err := p.msgs.next(ctx)
		if err != nil {
			return err
		}
		if typ == 'Z' {
			if body[0] != 'I' {
				return fmt.Errorf("transaction status %q after ROLLBACK", body[0])
			}
			return nil
		}
	}
}

// pipeError is a statement's ErrorResponse as pgx reports it (so the
// classifier finds its SQLSTATE), naming the statement.
func pipeError(body []byte, n, calls int) error {
	pe, err := pgError(body)
	if err != nil {
		return err
	}
	switch {
	case n < 0:
		return fmt.Errorf("BEGIN: %w", pe)
	case n >= calls:
		return fmt.Errorf("COMMIT: %w", pe)
	}
	return fmt.Errorf("statement %d of %d: %w", n+1, calls, pe)
}

func pgError(body []byte) (*pgconn.PgError, error) {
	var e pgproto3.ErrorResponse
	if err := e.Decode(body); err != nil {
		return nil, fmt.Errorf("malformed error response: %w", err)
	}
	return pgconn.ErrorResponseToPgError(&e), nil
}

// wireMsgs reads backend messages from a socket from TakeSocket.
type wireMsgs struct {
	fd    int
	buf   []byte
	next0 int // start of the next message in buf
}

// next returns the next message; body is valid until the following call.
// An ErrorResponse of severity FATAL or PANIC (the server ends the
// connection) comes back as an error.
func (r *wireMsgs) next(ctx context.Context) (typ byte, body []byte, err error) {
	for {
		b := r.buf[r.next0:]
		if len(b) >= 5 {
			n := int(binary.BigEndian.Uint32(b[1:5]))
			if n < 4 {
				return 0, nil, fmt.Errorf("protocol: message %q with length %d", b[0], n)
			}
			if len(b) >= 1+n {
				typ, body = b[0], b[5:1+n]
				r.next0 += 1 + n
				switch typ {
				case 'Z':
					if len(body) != 1 {
						return 0, nil, errors.New("protocol: malformed ReadyForQuery")
					}
				case 'E':
					if fatal(body) {
						pe, err := pgError(body)
						if err != nil {
							return 0, nil, err
						}
						return 0, nil, fmt.Errorf("server ended the connection: %w", pe)
					}
				case 'C', 'I', '2', 'D', 'N', 'S', 'A', 'n', 's':
					// CommandComplete, EmptyQuery, BindComplete, DataRow,
					// notices, parameter changes, notifications, NoData,
					// PortalSuspended.
				default:
					return 0, nil, fmt.Errorf("protocol: unexpected message %q", typ)
				}
				return typ, body, nil
			}
		}
		// Keep the partial message, read more after it.
		r.buf = r.buf[:copy(r.buf, b)]
		r.next0 = 0
		if len(r.buf) == cap(r.buf) {
			r.buf = append(r.buf, make([]byte, cap(r.buf))...)[:len(r.buf)]
		}
		n, err := enginekit.SockRead(ctx, r.fd, r.buf[len(r.buf):cap(r.buf)])
		if err != nil {
			return 0, nil, err
		}
		r.buf = r.buf[:len(r.buf)+n]
	}
}

// fatal says whether an ErrorResponse body has severity FATAL or PANIC:
// the server ends the connection after it.
func fatal(body []byte) bool {
	for len(body) > 1 && body[0] != 0 {
		f := cstring(body[1:])
		if body[0] == 'V' {
			return string(f) == "FATAL" || string(f) == "PANIC"
		}
		if 1+len(f) >= len(body) {
			break
		}
		body = body[1+len(f)+1:]
	}
	return false
}

// appendBindExecute encodes Bind (unnamed portal, no parameters, text
// results) and Execute of statement i.
func (p *pipe) appendBindExecute(b []byte, i int) []byte {
	b, start := beginMsg(b, 'B')
	b = append(b, 0) // portal
	b = append(b, p.stmts[i].name...)
	b = append(b, 0, 0, 0, 0, 0, 0, 0) // statement's NUL, no formats, no parameters, no result formats
	b = endMsg(b, start)
	return append(b, 'E', 0, 0, 0, 9, 0, 0, 0, 0, 0) // unnamed portal, all rows
}

// appendCall encodes Bind (the arguments in text, as libpq sends them,
// or as pgx's type map encodes what it is not plain text or a number)
// and Execute of one call.
func (p *pipe) appendCall(b []byte, cl engine.PipeCall) ([]byte, error) {
	i := cl.Stmt + pipeBuiltin
	if cl.Stmt < 0 || i >= len(p.stmts) {
		return b, fmt.Errorf("pipeline: no statement %d", cl.Stmt)
	}
	st := p.stmts[i]
	if len(cl.Args) != len(st.oids) {
		return b, fmt.Errorf("pipeline: statement %d takes %d arguments, got %d", cl.Stmt, len(st.oids), len(cl.Args))
	}
	b, start := beginMsg(b, 'B')
	b = append(b, 0)
	b = append(b, st.name...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(cl.Args)))
	formats := len(b)
	b = append(b, make([]byte, 2*len(cl.Args))...) // format codes, filled below
	b = binary.BigEndian.AppendUint16(b, uint16(len(cl.Args)))
	for j, a := range cl.Args {
		var format int16
		var err error
		if b, format, err = p.appendArg(b, st.oids[j], a); err != nil {
			return b, fmt.Errorf("pipeline: argument %d of statement %d: %w", j+1, cl.Stmt, err)
		}
		binary.BigEndian.PutUint16(b[formats+2*j:], uint16(format))
	}
	b = append(b, 0, 0) // text results
	b = endMsg(b, start)
	return append(b, 'E', 0, 0, 0, 9, 0, 0, 0, 0, 0), nil
}

// appendArg appends one parameter: its length and value.
func (p *pipe) appendArg(b []byte, oid uint32, a any) ([]byte, int16, error) {
	if out, ok := appendPlain(b, oid, a); ok {
		return out, pgtype.TextFormatCode, nil
	}
	if p.types == nil {
		p.types = pgtype.NewMap()
	}
	format := p.types.FormatCodeForOID(oid)
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	out, err := p.types.Encode(oid, format, a, b)
	if err != nil {
		return b[:at], 0, err
	}
	if out == nil { // NULL
		return appendNull(b[:at]), format, nil
	}
	binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	return out, format, nil
}

// appendPlain appends a in text format without pgx's type map: NULL, a
// string or bytes for a textual parameter, an integer for a numeric one,
// and a pointer to those as what it points to (nil as NULL: a workload's
// Scratch holds its arguments so, see workload.Call). ok is false for
// anything else.
func appendPlain(b []byte, oid uint32, a any) (_ []byte, ok bool) {
	switch v := a.(type) {
	case nil:
		return appendNull(b), true
	case string:
		return appendText(b, oid, v)
	case []byte:
		if v == nil {
			return appendNull(b), true
		}
		return appendText(b, oid, v)
	case *[]byte:
		if v == nil || *v == nil {
			return appendNull(b), true
		}
		return appendText(b, oid, *v)
	case int64:
		return appendNumber(b, oid, v)
	case *int64:
		if v == nil {
			return appendNull(b), true
		}
		return appendNumber(b, oid, *v)
	case int:
		return appendNumber(b, oid, int64(v))
	case int32:
		return appendNumber(b, oid, int64(v))
	}
	return b, false
}

func appendNull(b []byte) []byte { return append(b, 0xff, 0xff, 0xff, 0xff) }

// appendText: the bytes of a string or []byte are a textual parameter's
// text format as they are.
func appendText[T string | []byte](b []byte, oid uint32, v T) ([]byte, bool) {
	if !textual(oid) {
		return b, false
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...), true
}

// appendNumber: a decimal integer is a numeric parameter's text format.
func appendNumber(b []byte, oid uint32, v int64) ([]byte, bool) {
	if !numeric(oid) {
		return b, false
	}
	return appendInt(b, v), true
}

func appendInt(b []byte, v int64) []byte {
	at := len(b)
	b = strconv.AppendInt(append(b, 0, 0, 0, 0), v, 10)
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// textual: a Go string is the parameter's text format as it is.
func textual(oid uint32) bool {
	switch oid {
	case pgtype.TextOID, pgtype.VarcharOID, pgtype.BPCharOID, pgtype.NameOID, pgtype.UnknownOID:
		return true
	}
	return false
}

// numeric: a decimal integer is the parameter's text format.
func numeric(oid uint32) bool {
	switch oid {
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.NumericOID, pgtype.Float4OID, pgtype.Float8OID:
		return true
	}
	return false
}

func beginMsg(b []byte, typ byte) ([]byte, int) {
	return append(b, typ, 0, 0, 0, 0), len(b) + 1
}

func endMsg(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// rowsAffected reads a CommandComplete tag's count ("UPDATE 1", "INSERT
// 0 5"); tags without one count 0, as in pgx.
func rowsAffected(body []byte) int64 {
	tag := cstring(body)
	i := len(tag)
	for i > 0 && tag[i-1] >= '0' && tag[i-1] <= '9' {
		i--
	}
	if i == len(tag) || i == 0 || tag[i-1] != ' ' {
		return 0
	}
	var n int64
	for _, c := range tag[i:] {
		n = n*10 + int64(c-'0')
	}
	return n
}

// cstring is b up to its first NUL.
func cstring(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// badConn tells database/sql (errors.Is driver.ErrBadConn) to forget a
// connection, saying why.
type badConn struct{ err error }

func (e badConn) Error() string        { return e.err.Error() }
func (e badConn) Unwrap() error        { return e.err }
func (e badConn) Is(target error) bool { return target == driver.ErrBadConn }

// TakeSocket takes pc's socket over from pgx (pc is unusable afterwards)
// as a blocking descriptor of its own (enginekit.BlockingSocket).
func TakeSocket(pc *pgconn.PgConn) (int, error) {
	hc, err := pc.Hijack()
	if err != nil {
		return -1, err
	}
	defer hc.Conn.Close() // the duplicate keeps the socket open
	if hc.TLSConfig != nil {
		return -1, errors.New("TLS connections are not supported")
	}
	return enginekit.BlockingSocket(hc.Conn)
}
