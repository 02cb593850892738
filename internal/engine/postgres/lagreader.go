package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"replab/internal/engine"
	"replab/internal/engine/pgpipe"
	"replab/internal/enginekit"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"golang.org/x/sys/unix"
)

// LagReader implements engine.LagReaders: replab_lag polled over one
// connection from the replica's own site, taken over from pgx and spoken
// to directly (wireConn). A failed poll drops the connection; the next one
// makes a new one.
func (c *cluster) LagReader(ctx context.Context, node string) (engine.LagReader, error) {
	if c.isSink(node) {
		return c.sinks.LagReader(ctx, node)
	}
	n := c.byName[node]
	if n == nil {
		return nil, fmt.Errorf("no node %q", node)
	}
	cfg, err := c.connConfig(node, n.Site)
	if err != nil {
		return nil, err
	}
	return &lagReader{cfg: cfg, gate: c.lagGate(node)}, nil
}

// lagReader is a wireConn that reconnects.
type lagReader struct {
	cfg  *pgx.ConnConfig
	wire *wireConn
	// gate, when set, says whether the node may be read now; while it
	// says no, the reader holds no connection (pgautofailover.go).
	gate func() error
}

// Positions implements engine.LagReader.
func (r *lagReader) Positions(ctx context.Context, dst []int64) error {
	if r.gate != nil {
		if err := r.gate(); err != nil {
			_ = r.Close()
			return err
		}
	}
	if r.wire == nil {
		conn, err := pgx.ConnectConfig(ctx, r.cfg)
		if err != nil {
			return err
		}
		w, err := hijackWire(ctx, conn.PgConn(), enginekit.LagSelectSQL)
		if err != nil {
			conn.Close(context.Background())
			return err
		}
		r.wire = w
	}
	err := r.wire.poll(ctx, func(w int32, seq int64) {
		if w >= 0 && int(w) < len(dst) {
			dst[w] = seq
		}
	})
	if r.wire.fd < 0 {
		r.wire = nil
	}
	return err
}

// Close implements engine.LagReader.
func (r *lagReader) Close() error {
	if r.wire != nil {
		r.wire.close()
		r.wire = nil
	}
	return nil
}

// wireConn polls PostgreSQL with one prepared statement over a socket taken
// over from pgx, in blocking mode. pgx would park the watcher's goroutine
// on the netpoller for every reply, and a goroutine locked to its thread
// (as the watcher's is, for its precise sleeps) is handed between OS
// threads on each wake-up: 83 µs of CPU per poll on this 2-core machine.
// A blocking write and read on the watcher's own thread cost a fraction.
type wireConn struct {
	fd  int
	req []byte // Bind + Execute + Sync of the prepared statement
	buf []byte
}

// wirePollStmt is the prepared statement's name on the server.
const wirePollStmt = "replab_lag_poll"

// hijackWire prepares query on pc, checks that it returns (int4, int8)
// rows, and takes the connection over. pc is unusable afterwards.
func hijackWire(ctx context.Context, pc *pgconn.PgConn, query string) (*wireConn, error) {
	sd, err := pc.Prepare(ctx, wirePollStmt, query, nil)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: %w", query, err)
	}
	if len(sd.Fields) != 2 || sd.Fields[0].DataTypeOID != pgtype.Int4OID || sd.Fields[1].DataTypeOID != pgtype.Int8OID {
		return nil, fmt.Errorf("%s: want columns (int4, int8), got %d columns", query, len(sd.Fields))
	}
	if err := pc.SyncConn(ctx); err != nil {
		return nil, err
	}
	fd, err := pgpipe.TakeSocket(pc)
	if err != nil {
		return nil, err
	}
	req, err := bindExecuteSync(wirePollStmt)
	if err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	return &wireConn{fd: fd, req: req, buf: make([]byte, 0, 64<<10)}, nil
}

func sockWrite(ctx context.Context, fd int, b []byte) error { return enginekit.SockWrite(ctx, fd, b) }

func sockRead(ctx context.Context, fd int, b []byte) (int, error) {
	return enginekit.SockRead(ctx, fd, b)
}

// bindExecuteSync encodes Bind (unnamed portal, no parameters, binary
// results), Execute (all rows) and Sync for a prepared statement.
func bindExecuteSync(stmt string) ([]byte, error) {
	b, err := (&pgproto3.Bind{PreparedStatement: stmt, ResultFormatCodes: []int16{pgx.BinaryFormatCode}}).Encode(nil)
	if err == nil {
		b, err = (&pgproto3.Execute{}).Encode(b)
	}
	if err == nil {
		b, err = (&pgproto3.Sync{}).Encode(b)
	}
	return b, err
}

// poll runs the statement once and calls row for each (int4, int8) row.
// On any error the connection is closed: the caller reconnects.
func (w *wireConn) poll(ctx context.Context, row func(a int32, b int64)) error {
	err := w.exchange(ctx, row)
	var se *serverError
	if err != nil && !errors.As(err, &se) {
		w.close()
	}
	return err
}

func (w *wireConn) exchange(ctx context.Context, row func(a int32, b int64)) error {
	if err := sockWrite(ctx, w.fd, w.req); err != nil {
		return err
	}
	w.buf = w.buf[:0]
	var failed error
	for {
		// Whole messages first.
		for len(w.buf) >= 5 {
			n := int(binary.BigEndian.Uint32(w.buf[1:5]))
			if n < 4 {
				return fmt.Errorf("protocol: message %q with length %d", w.buf[0], n)
			}
			if len(w.buf) < 1+n {
				break
			}
			typ, body := w.buf[0], w.buf[5:1+n]
			switch typ {
			case 'D':
				if err := dataRow(body, row); err != nil {
					return err
				}
			case 'E':
				failed = &serverError{msg: errorMessage(body)}
			case 'Z':
				if len(w.buf) != 1+n {
					return errors.New("protocol: data after ReadyForQuery")
				}
				return failed
			case '2', 'C', 'N', 'S', 'A', 'n':
				// BindComplete, CommandComplete, notices, parameter
				// changes, notifications, NoData: nothing to read.
			default:
				return fmt.Errorf("protocol: unexpected message %q", typ)
			}
			w.buf = w.buf[:copy(w.buf, w.buf[1+n:])]
		}
		if len(w.buf) == cap(w.buf) {
			w.buf = append(w.buf, make([]byte, cap(w.buf))...)[:len(w.buf)]
		}
		n, err := sockRead(ctx, w.fd, w.buf[len(w.buf):cap(w.buf)])
		if err != nil {
			return err
		}
		w.buf = w.buf[:len(w.buf)+n]
	}
}

// dataRow decodes one DataRow of (int4, int8) in binary.
func dataRow(b []byte, row func(int32, int64)) error {
	if len(b) < 2+4+4+4+8 || binary.BigEndian.Uint16(b) != 2 {
		return fmt.Errorf("protocol: data row of %d bytes, want two columns", len(b))
	}
	if binary.BigEndian.Uint32(b[2:]) != 4 || binary.BigEndian.Uint32(b[10:]) != 8 {
		return errors.New("protocol: data row columns are not (int4, int8)")
	}
	row(int32(binary.BigEndian.Uint32(b[6:])), int64(binary.BigEndian.Uint64(b[14:])))
	return nil
}

// errorMessage is the severity, message and code of an ErrorResponse.
func errorMessage(b []byte) string {
	var e pgproto3.ErrorResponse
	if err := e.Decode(b); err != nil {
		return "malformed error response: " + err.Error()
	}
	return fmt.Sprintf("%s: %s (SQLSTATE %s)", e.Severity, e.Message, e.Code)
}

// serverError is an error the server answered with: the connection is
// still in step and stays open.
type serverError struct{ msg string }

func (e *serverError) Error() string { return e.msg }

func (w *wireConn) close() {
	if w.fd >= 0 {
		_, _ = unix.Write(w.fd, []byte{'X', 0, 0, 0, 4}) // Terminate, best effort
		_ = unix.Close(w.fd)
		w.fd = -1
	}
}
