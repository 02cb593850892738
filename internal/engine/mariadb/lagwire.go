package mariadb

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"replab/internal/enginekit"

	"golang.org/x/sys/unix"
)

// wireReader polls replab_lag over a connection of its own, spoken to
// directly in blocking mode on the watcher's thread, as PostgreSQL's
// reader does: through database/sql and go-sql-driver a poll cost 187 µs
// of CPU here and 104 µs at the replica (bench step lag-mariadb), and the
// watcher polls from shortly after each tracked COMMIT until it sees it.
// The protocol is the classic one: a handshake with mysql_native_password
// and text-protocol queries (COM_QUERY), whose replies are a few packets.
type wireReader struct {
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	addr      string
	user, pw  string
	db        string
	syncWait0 bool // Galera: SET wsrep_sync_wait = 0 (see LagReader)

	fd  int
	req []byte // the poll's COM_QUERY packet
	buf []byte
}

// Positions implements engine.LagReader.
func (r *wireReader) Positions(ctx context.Context, dst []int64) error {
	if r.fd <= 0 {
		if err := r.connect(ctx); err != nil {
			return err
		}
	}
	err := r.query(ctx, r.req, func(w int32, seq int64) {
		if w >= 0 && int(w) < len(dst) {
			dst[w] = seq
		}
	})
	var se *serverError
	if err != nil && !errors.As(err, &se) {
		r.Close() // out of step: the next poll reconnects
	}
	return err
}

// Close implements engine.LagReader.
func (r *wireReader) Close() error {
	if r.fd > 0 {
		_ = enginekit.SockWrite(context.Background(), r.fd, []byte{1, 0, 0, 0, comQuit})
		_ = unix.Close(r.fd)
	}
	r.fd = -1
	return nil
}

const (
	comQuit  = 0x01
	comQuery = 0x03

	capLongPassword   = 0x1
	capConnectWithDB  = 0x8
	capProtocol41     = 0x200
	capTransactions   = 0x2000
	capSecureConn     = 0x8000
	capPluginAuth     = 0x80000
	nativePassword    = "mysql_native_password"
	handshakeDeadline = 10 * time.Second
)

// connect dials, authenticates (on the net.Conn, with a deadline), then
// takes the socket over in blocking mode.
func (r *wireReader) connect(ctx context.Context) error {
	conn, err := r.dial(ctx, "tcp", r.addr)
	if err != nil {
		return err
	}
	defer conn.Close() // the blocking duplicate keeps the socket open
	_ = conn.SetDeadline(time.Now().Add(handshakeDeadline))
	if err := r.handshake(conn); err != nil {
		return fmt.Errorf("lag reader: connect to %s: %w", r.addr, err)
	}
	fd, err := enginekit.BlockingSocket(conn)
	if err != nil {
		return err
	}
	r.fd, r.buf = fd, make([]byte, 0, 16<<10)
	r.req = packet(0, append([]byte{comQuery}, enginekit.LagSelectSQL...))
	if r.syncWait0 {
		if err := r.query(ctx, packet(0, append([]byte{comQuery}, "SET SESSION wsrep_sync_wait = 0"...)), nil); err != nil {
			r.Close()
			return fmt.Errorf("lag reader at %s: %w", r.addr, err)
		}
	}
	return nil
}

// handshake answers the server's greeting with the user, the database and
// a mysql_native_password scramble, following one auth switch if asked.
func (r *wireReader) handshake(conn net.Conn) error {
	seq, greet, err := readPacket(conn)
	if err != nil {
		return err
	}
	if len(greet) > 0 && greet[0] == 0xff {
		return errPacket(greet)
	}
	salt, err := greetingSalt(greet)
	if err != nil {
		return err
	}
	caps := uint32(capLongPassword | capConnectWithDB | capProtocol41 | capTransactions | capSecureConn | capPluginAuth)
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, caps)
	b = binary.LittleEndian.AppendUint32(b, 1<<24) // max packet
	b = append(b, 45)                              // utf8mb4_general_ci
	b = append(b, make([]byte, 23)...)
	b = append(append(b, r.user...), 0)
	auth := scramble(salt, r.pw)
	b = append(append(b, byte(len(auth))), auth...)
	b = append(append(b, r.db...), 0)
	b = append(append(b, nativePassword...), 0)
	if _, err := conn.Write(packet(seq+1, b)); err != nil {
		return err
	}
	seq, reply, err := readPacket(conn)
	if err != nil {
		return err
	}
	if len(reply) > 0 && reply[0] == 0xfe { // auth switch request
		plugin, data, _ := bytes.Cut(reply[1:], []byte{0})
		if string(plugin) != nativePassword {
			return fmt.Errorf("the server asks for authentication plugin %q; the lag reader speaks %s", plugin, nativePassword)
		}
		if _, err := conn.Write(packet(seq+1, scramble(bytes.TrimRight(data, "\x00"), r.pw))); err != nil {
			return err
		}
		if _, reply, err = readPacket(conn); err != nil {
			return err
		}
	}
	switch {
	case len(reply) > 0 && reply[0] == 0x00:
		return nil
	case len(reply) > 0 && reply[0] == 0xff:
		return errPacket(reply)
	}
	return fmt.Errorf("unexpected reply to the handshake (first byte %#x)", firstByte(reply))
}

// greetingSalt reads the 20-byte scramble from a protocol-10 greeting.
func greetingSalt(g []byte) ([]byte, error) {
	if len(g) < 1 || g[0] != 10 {
		return nil, fmt.Errorf("server greeting of protocol %d, want 10", firstByte(g))
	}
	end := bytes.IndexByte(g[1:], 0)
	if end < 0 {
		return nil, errors.New("malformed server greeting")
	}
	p := 1 + end + 1 + 4 // version, NUL, connection id
	if len(g) < p+8+1+2+1+2+2+1+10+12 {
		return nil, errors.New("short server greeting")
	}
	salt := append([]byte(nil), g[p:p+8]...)
	p += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10 // salt 1, filler, caps, charset, status, caps, salt length, reserved
	return append(salt, g[p:p+12]...), nil
}

// scramble is mysql_native_password's answer: SHA1(pw) XOR
// SHA1(salt + SHA1(SHA1(pw))); empty for an empty password.
func scramble(salt []byte, pw string) []byte {
	if pw == "" {
		return nil
	}
	h1 := sha1.Sum([]byte(pw))
	h2 := sha1.Sum(h1[:])
	h := sha1.New()
	h.Write(salt[:min(len(salt), 20)])
	h.Write(h2[:])
	out := h.Sum(nil)
	for i := range out {
		out[i] ^= h1[i]
	}
	return out
}

// query sends a COM_QUERY packet and reads its reply to the end: an OK,
// an error, or a result set whose rows of (int, int) go to row.
func (r *wireReader) query(ctx context.Context, req []byte, row func(int32, int64)) error {
	return r.queryRows(ctx, req, func(p []byte) error { return textRow(p, row) })
}

// queryRows is query with each row's packet handed to row as it is.
func (r *wireReader) queryRows(ctx context.Context, req []byte, row func(p []byte) error) error {
	if err := enginekit.SockWrite(ctx, r.fd, req); err != nil {
		return err
	}
	r.buf = r.buf[:0]
	const (
		first = iota
		columns
		rows
	)
	state := first
	for {
		for len(r.buf) >= 4 {
			n := int(r.buf[0]) | int(r.buf[1])<<8 | int(r.buf[2])<<16
			if len(r.buf) < 4+n {
				break
			}
			p := r.buf[4 : 4+n]
			done, err := false, error(nil)
			switch {
			case len(p) > 0 && p[0] == 0xff:
				return &serverError{msg: errPacket(p).Error()} // the server is done with the query
			case state == first && len(p) > 0 && p[0] == 0x00:
				done = true // OK: a statement without rows
			case state == first:
				state = columns // the column count
			case state == columns && isEOF(p):
				state = rows
			case state == columns:
				// a column definition
			case state == rows && isEOF(p):
				done = true
			case state == rows:
				err = row(p)
			}
			r.buf = r.buf[:copy(r.buf, r.buf[4+n:])]
			if err != nil {
				return err
			}
			if done {
				if len(r.buf) != 0 {
					return errors.New("protocol: data after the end of a reply")
				}
				return nil
			}
		}
		if len(r.buf) == cap(r.buf) {
			r.buf = append(r.buf, make([]byte, cap(r.buf))...)[:len(r.buf)]
		}
		n, err := enginekit.SockRead(ctx, r.fd, r.buf[len(r.buf):cap(r.buf)])
		if err != nil {
			return err
		}
		r.buf = r.buf[:len(r.buf)+n]
	}
}

// textRow decodes a text-protocol row of two integers.
func textRow(p []byte, row func(int32, int64)) error {
	a, rest, err := lenencString(p)
	if err != nil {
		return err
	}
	b, _, err := lenencString(rest)
	if err != nil {
		return err
	}
	w, err1 := strconv.ParseInt(string(a), 10, 32)
	seq, err2 := strconv.ParseInt(string(b), 10, 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("protocol: row (%q, %q) is not two integers", a, b)
	}
	if row != nil {
		row(int32(w), seq)
	}
	return nil
}

// lenencString splits a length-encoded string (lengths below 251: the
// values here are a few digits) off p.
func lenencString(p []byte) (s, rest []byte, err error) {
	if len(p) == 0 || p[0] >= 251 || len(p) < 1+int(p[0]) {
		return nil, nil, errors.New("protocol: malformed row")
	}
	return p[1 : 1+int(p[0])], p[1+int(p[0]):], nil
}

// isEOF: an EOF packet (0xfe, shorter than 9 bytes).
func isEOF(p []byte) bool { return len(p) > 0 && p[0] == 0xfe && len(p) < 9 }

// packet frames payload with its length and sequence number.
func packet(seq byte, payload []byte) []byte {
	n := len(payload)
	return append([]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}, payload...)
}

// readPacket reads one packet from a net.Conn (the handshake).
func readPacket(conn net.Conn) (seq byte, payload []byte, err error) {
	var h [4]byte
	if _, err := readFull(conn, h[:]); err != nil {
		return 0, nil, err
	}
	payload = make([]byte, int(h[0])|int(h[1])<<8|int(h[2])<<16)
	if _, err := readFull(conn, payload); err != nil {
		return 0, nil, err
	}
	return h[3], payload, nil
}

func readFull(conn net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := conn.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// errPacket decodes an ERR packet: code, SQL state and message.
func errPacket(p []byte) error {
	if len(p) < 3 {
		return errors.New("malformed error packet")
	}
	code := binary.LittleEndian.Uint16(p[1:3])
	msg := p[3:]
	if len(msg) > 6 && msg[0] == '#' {
		return fmt.Errorf("error %d (%s): %s", code, msg[1:6], msg[6:])
	}
	return fmt.Errorf("error %d: %s", code, msg)
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// serverError is an error the server answered with: the connection is
// still in step and stays open.
type serverError struct{ msg string }

func (e *serverError) Error() string { return e.msg }
