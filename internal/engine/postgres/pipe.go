package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"golang.org/x/sys/unix"

	"replab/internal/engine"
)

// Pipe implements engine.Pipeliner. It prepares BEGIN, COMMIT, ROLLBACK
// and stmts on conn (named server-side statements, once), then each Run
// writes Bind/Execute of each and one Sync in one write, and reads the
// replies on the caller's thread with blocking poll and read system
// calls. Through pgx a pipelined transaction cost this process about
// 33 µs of CPU, half of it in handing the goroutine between the
// netpoller and OS threads (the server's reply is ~70 µs away, so the
// goroutine always parks); a thread that sleeps in poll(2) until the
// reply is there costs a fraction.
func (c *cluster) Pipe(ctx context.Context, conn *sql.Conn, stmts []string) (engine.Pipe, error) {
	p := &pipe{conn: conn, prefix: fmt.Sprintf("replab_pipe%d_", pipeSeq.Add(1))}
	err := conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return engine.ErrNoPipeline
		}
		pc := sc.Conn().PgConn()
		raw, ok := pc.Conn().(syscall.Conn) // not a TLS connection
		if !ok {
			return engine.ErrNoPipeline
		}
		rc, err := raw.SyscallConn()
		if err != nil {
			return engine.ErrNoPipeline
		}
		p.rc = rc
		all := append([]string{"BEGIN", "COMMIT", "ROLLBACK"}, stmts...)
		for i, q := range all {
			sd, err := pc.Prepare(ctx, p.prefix+strconv.Itoa(i), q, nil)
			if err != nil {
				return fmt.Errorf("prepare %q: %w", q, err)
			}
			p.stmts = append(p.stmts, pipeStmt{name: sd.Name, oids: sd.ParamOIDs})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	p.begin = p.appendBindExecute(nil, 0)
	p.commit = p.appendBindExecute(nil, 1)
	rollback := p.appendBindExecute(nil, 2)
	p.rollback = append(rollback, 'S', 0, 0, 0, 4)
	p.buf = make([]byte, 0, 8<<10)
	return p, nil
}

// pipeSeq makes prepared statement names unique within a connection.
var pipeSeq atomic.Int64

// pipeBuiltin is how many statements Pipe prepares before the caller's.
const pipeBuiltin = 3

// pipeWait bounds one blocking wait, so a cancelled context is noticed
// while a server is slow (or paused) to answer.
const pipeWait = 50 * time.Millisecond

// pipe is one connection's pipelined transactions; one goroutine uses it.
type pipe struct {
	conn   *sql.Conn
	rc     syscall.RawConn
	prefix string
	stmts  []pipeStmt // BEGIN, COMMIT, ROLLBACK, then the caller's
	types  *pgtype.Map

	begin, commit, rollback []byte // encoded once
	req, buf                []byte
	pfd                     [1]unix.PollFd
}

type pipeStmt struct {
	name string
	oids []uint32
}

// Run implements engine.Pipe.
func (p *pipe) Run(ctx context.Context, calls []engine.PipeCall, beforeSend func(), rows []int64) error {
	req := append(p.req[:0], p.begin...)
	for _, cl := range calls {
		var err error
		if req, err = p.appendCall(req, cl); err != nil {
			return err // nothing sent
		}
	}
	req = append(req, p.commit...)
	req = append(req, 'S', 0, 0, 0, 4)
	p.req = req
	var runErr error
	err := p.conn.Raw(func(any) error {
		if beforeSend != nil {
			beforeSend()
		}
		var ioErr error
		if err := p.rc.Control(func(fd uintptr) { runErr, ioErr = p.exchange(ctx, int(fd), rows) }); err != nil {
			ioErr = err
		}
		if ioErr != nil {
			// The connection is out of step with the server: database/sql
			// closes it.
			return badConn{ioErr}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return runErr
}

// exchange sends p.req and reads the replies up to ReadyForQuery, then
// rolls back a transaction an error left open. runErr is the server's
// answer (an error of one statement); ioErr means the connection is
// unusable.
func (p *pipe) exchange(ctx context.Context, fd int, rows []int64) (runErr, ioErr error) {
	if err := p.writeAll(ctx, fd, p.req); err != nil {
		return nil, err
	}
	n := -1 // replies so far: BEGIN is -1, calls 0…, COMMIT len(rows)
	var status byte
	err := p.replies(ctx, fd, func(typ byte, body []byte) error {
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
		case 'E':
			if runErr == nil {
				runErr = pipeError(body, n, len(rows))
			}
		case 'Z':
			status = body[0]
		}
		return nil
	})
	if err != nil {
		return runErr, err
	}
	if status != 'I' {
		// A statement failed inside BEGIN: the server skipped the rest, up
		// to Sync, and the transaction is aborted until ROLLBACK.
		if err := p.writeAll(ctx, fd, p.rollback); err != nil {
			return runErr, err
		}
		if err := p.replies(ctx, fd, func(typ byte, body []byte) error {
			if typ == 'Z' {
				status = body[0]
			}
			return nil
		}); err != nil {
			return runErr, err
		}
		if status != 'I' {
			return runErr, fmt.Errorf("transaction status %q after ROLLBACK", status)
		}
		if runErr == nil {
			runErr = errors.New("transaction left open")
		}
	}
	return runErr, nil
}

// pipeError is a statement's ErrorResponse as pgx reports it (so the
// classifier finds its SQLSTATE), naming the statement.
func pipeError(body []byte, n, calls int) error {
	var e pgproto3.ErrorResponse
	if err := e.Decode(body); err != nil {
		return fmt.Errorf("malformed error response: %w", err)
	}
	pe := pgconn.ErrorResponseToPgError(&e)
	switch {
	case n < 0:
		return fmt.Errorf("BEGIN: %w", pe)
	case n >= calls:
		return fmt.Errorf("COMMIT: %w", pe)
	}
	return fmt.Errorf("statement %d of %d: %w", n+1, calls, pe)
}

// replies reads messages up to and including ReadyForQuery, handing each
// to msg; an ErrorResponse with severity FATAL or PANIC ends the
// connection.
func (p *pipe) replies(ctx context.Context, fd int, msg func(typ byte, body []byte) error) error {
	p.buf = p.buf[:0]
	for {
		for len(p.buf) >= 5 {
			n := int(binary.BigEndian.Uint32(p.buf[1:5]))
			if n < 4 {
				return fmt.Errorf("protocol: message %q with length %d", p.buf[0], n)
			}
			if len(p.buf) < 1+n {
				break
			}
			typ, body := p.buf[0], p.buf[5:1+n]
			switch typ {
			case 'Z':
				if len(body) != 1 {
					return errors.New("protocol: malformed ReadyForQuery")
				}
				if len(p.buf) != 1+n {
					return errors.New("protocol: data after ReadyForQuery")
				}
				return msg(typ, body)
			case 'E':
				if fatal(body) {
					var e pgproto3.ErrorResponse
					if err := e.Decode(body); err != nil {
						return fmt.Errorf("malformed error response: %w", err)
					}
					return fmt.Errorf("server ended the connection: %w", pgconn.ErrorResponseToPgError(&e))
				}
			case 'C', 'I', '2', 'D', 'N', 'S', 'A', 'n', 's':
				// CommandComplete, EmptyQuery, BindComplete, DataRow,
				// notices, parameter changes, notifications, NoData,
				// PortalSuspended.
			default:
				return fmt.Errorf("protocol: unexpected message %q", typ)
			}
			if err := msg(typ, body); err != nil {
				return err
			}
			p.buf = p.buf[:copy(p.buf, p.buf[1+n:])]
		}
		if len(p.buf) == cap(p.buf) {
			p.buf = append(p.buf, make([]byte, cap(p.buf))...)[:len(p.buf)]
		}
		n, err := p.readSome(ctx, fd, p.buf[len(p.buf):cap(p.buf)])
		if err != nil {
			return err
		}
		p.buf = p.buf[:len(p.buf)+n]
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

// writeAll writes b to the non-blocking socket fd, sleeping in poll(2)
// while its buffer is full.
func (p *pipe) writeAll(ctx context.Context, fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if err := p.wait(ctx, fd, unix.POLLOUT); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("write: %w", err)
		}
		b = b[n:]
	}
	return nil
}

// readSome reads what is there, sleeping in poll(2) until something is.
// The reply to a request just written is never there yet, so it polls
// first.
func (p *pipe) readSome(ctx context.Context, fd int, b []byte) (int, error) {
	for {
		if err := p.wait(ctx, fd, unix.POLLIN); err != nil {
			return 0, err
		}
		n, err := unix.Read(fd, b)
		switch {
		case err == unix.EINTR || err == unix.EAGAIN:
			continue
		case err != nil:
			return 0, fmt.Errorf("read: %w", err)
		case n == 0:
			return 0, errors.New("server closed the connection")
		}
		return n, nil
	}
}

// wait sleeps until fd is ready for events, looking at ctx every
// pipeWait.
func (p *pipe) wait(ctx context.Context, fd int, events int16) error {
	p.pfd[0] = unix.PollFd{Fd: int32(fd), Events: events}
	for {
		n, err := unix.Poll(p.pfd[:], int(pipeWait/time.Millisecond))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("poll: %w", err)
		case n > 0:
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err // the reply is still due: the connection is closed
		}
	}
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
	switch v := a.(type) {
	case nil:
		return append(b, 0xff, 0xff, 0xff, 0xff), pgtype.TextFormatCode, nil
	case string:
		if textual(oid) {
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			return append(b, v...), pgtype.TextFormatCode, nil
		}
	case int64:
		if numeric(oid) {
			return appendInt(b, v), pgtype.TextFormatCode, nil
		}
	case int:
		if numeric(oid) {
			return appendInt(b, int64(v)), pgtype.TextFormatCode, nil
		}
	case int32:
		if numeric(oid) {
			return appendInt(b, int64(v)), pgtype.TextFormatCode, nil
		}
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
		return binary.BigEndian.AppendUint32(b[:at], 0xffffffff), format, nil
	}
	binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	return out, format, nil
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
	n, _ := strconv.ParseInt(string(tag[i:]), 10, 64)
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

// badConn carries why a connection is unusable, and tells database/sql
// (errors.Is driver.ErrBadConn) to close it.
type badConn struct{ err error }

func (e badConn) Error() string        { return e.err.Error() }
func (e badConn) Unwrap() error        { return e.err }
func (e badConn) Is(target error) bool { return target == driver.ErrBadConn }
