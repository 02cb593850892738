package mariadb

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"syscall"

	"replab/internal/engine"
)

// Lag by commit position (engine.Positions): a GTID replica of one primary
// applies the primary's transactions in the order of their GTIDs'
// sequence numbers in the primary's domain, and its @@gtid_slave_pos
// shows the last one it committed (updated after the commit, so what it
// shows is visible). A commit is visible there once that number is at or
// past the commit's own. The client learns its commit's GTID from the
// commit's OK packet: the session tracks last_gtid
// (session_track_system_variables; MariaDB marks it changed when the
// transaction is binlogged, and reports it with the reply), and the OK
// packet carries it when the client has CLIENT_SESSION_TRACK.
// go-sql-driver/mysql neither asks for that capability nor hands session
// state to its caller, so the pools' connections pass through trackConn,
// which sets the capability in the handshake and reads the reply to every
// COMMIT itself (the driver reads the OK packet's header and ignores the
// rest).
//
// Rings and two-way masters number each master's transactions in a domain
// of their own: no positions there.

var (
	_ engine.Positions        = (*cluster)(nil)
	_ engine.SessionPositions = (*cluster)(nil)
)

// PositionMethod implements engine.Positions: the replicas of the async and
// semi-sync schemes.
func (c *cluster) PositionMethod(name string) string {
	n := c.byName[name]
	if n == nil || n.From == "" || (c.plan.replication != Async && c.plan.replication != Semisync) {
		return ""
	}
	return "GTID slave position"
}

// CommitPositions implements engine.Positions: every commit tells its
// GTID.
func (c *cluster) CommitPositions() engine.CommitPositions { return engine.SessionCommits }

// domain is the GTID domain the sources' transactions are numbered in.
func (c *cluster) domain() uint32 {
	if len(c.plan.sources) > 0 {
		if d, err := strconv.ParseUint(c.byName[c.plan.sources[0]].Settings["gtid_domain_id"], 10, 32); err == nil {
			return uint32(d)
		}
	}
	return 0
}

// PositionReader implements engine.Positions: SELECT @@gtid_slave_pos
// over the replica's Unix socket, spoken to directly as the lag reader
// does (wireReader): beside the server, no link crossed, cheaper than TCP.
func (c *cluster) PositionReader(ctx context.Context, name string) (engine.PositionReader, error) {
	n := c.byName[name]
	if n == nil {
		return nil, fmt.Errorf("no node %q", name)
	}
	var d net.Dialer
	r := &gtidReader{wireReader: wireReader{dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", n.socket())
	}, addr: n.socket(), user: User, pw: c.password, db: Database, fd: -1}, domain: c.domain()}
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	r.req = packet(0, append([]byte{comQuery}, "SELECT @@gtid_slave_pos"...))
	return r, nil
}

// gtidReader reads a replica's @@gtid_slave_pos.
type gtidReader struct {
	wireReader
	domain uint32
}

// Applied implements engine.PositionReader: the sequence number of the
// domain's last GTID applied (0 before any).
func (r *gtidReader) Applied(ctx context.Context) (int64, error) {
	if r.fd <= 0 {
		if err := r.connect(ctx); err != nil {
			return 0, err
		}
		r.req = packet(0, append([]byte{comQuery}, "SELECT @@gtid_slave_pos"...))
	}
	var pos int64
	err := r.queryRows(ctx, r.req, func(p []byte) error {
		v, _, err := lenencString(p)
		if err != nil {
			return err
		}
		pos = gtidSeq(v, r.domain)
		return nil
	})
	if err != nil {
		var se *serverError
		if !errors.As(err, &se) {
			r.Close()
		}
		return 0, err
	}
	return pos, nil
}

// gtidSeq is the sequence number of domain's GTID in a position
// ("0-1-42,2-3-7"); 0 when it has none.
func gtidSeq(pos []byte, domain uint32) int64 {
	for _, g := range bytes.Split(pos, []byte(",")) {
		d, rest, ok := bytes.Cut(bytes.TrimSpace(g), []byte("-"))
		if !ok {
			continue
		}
		_, seq, ok := bytes.Cut(rest, []byte("-"))
		if !ok {
			continue
		}
		if dd, err := strconv.ParseUint(string(d), 10, 32); err == nil && uint32(dd) == domain {
			if s, err := strconv.ParseInt(string(seq), 10, 64); err == nil {
				return s
			}
		}
	}
	return 0
}

// CommitPositionsOf implements engine.SessionPositions: the connection's
// session tracks last_gtid, and its trackConn reads it from each COMMIT's
// reply.
func (c *cluster) CommitPositionsOf(ctx context.Context, sc *sql.Conn) (func() int64, error) {
	var id uint32
	var serverID uint32
	if err := sc.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @@server_id").Scan(&id, &serverID); err != nil {
		return nil, err
	}
	var n *node
	for _, m := range c.nodes {
		if uint32(m.index+1) == serverID {
			n = m
		}
	}
	if n == nil {
		return nil, fmt.Errorf("no node has server_id %d", serverID)
	}
	v, ok := c.tracked.Load(trackKey{addr: n.addr.String(), id: id})
	if !ok {
		return nil, fmt.Errorf("connection %d to %s did not go through replab's dialer", id, n.Name)
	}
	tc := v.(*trackConn)
	if !tc.tracking {
		return func() int64 { return 0 }, nil // the server cannot say
	}
	if _, err := sc.ExecContext(ctx, "SET SESSION session_track_system_variables = 'last_gtid'"); err != nil {
		return nil, err
	}
	return tc.last.Load, nil
}

// trackKey names a client connection: the server's address and its
// connection id there.
type trackKey struct {
	addr string
	id   uint32
}

// trackDial wraps dial: every connection it makes is a trackConn,
// registered by its connection id once the server's greeting names it.
func (c *cluster) trackDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &trackConn{Conn: conn, c: c, addr: addr, domain: c.domain()}, nil
	}
}

// Capabilities and flags of the protocol.
const (
	capSessionTrack     = 1 << 23
	statusStateChanged  = 1 << 14
	sessionTrackSysVars = 0
)

// trackConn is a client connection of the pools (go-sql-driver's) that
// learns the GTID of each COMMIT it carries. The driver reads and writes
// it from one goroutine at a time; last is read by the same goroutine
// after the COMMIT returned.
type trackConn struct {
	net.Conn
	c    *cluster
	addr string

	greeted  bool
	caps     uint32 // the server's capabilities
	id       uint32
	answered bool // the handshake response went
	tracking bool // it asked for session tracking
	domain   uint32

	// The server packet being read when one is wanted: the greeting, the
	// reply to a COMMIT.
	want bool
	hdr  [4]byte
	hn   int
	body []byte
	need int

	last atomic.Int64 // the sequence number of the last COMMIT's GTID
}

func (t *trackConn) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	if (!t.greeted || t.want) && n > 0 {
		t.scan(b[:n])
	}
	return n, err
}

func (t *trackConn) Write(b []byte) (int, error) {
	switch {
	case t.greeted && !t.answered:
		// The handshake response (or, with TLS, the SSL request: the
		// connection is then left alone).
		t.answered = true
		if len(b) >= 8 && t.caps&capSessionTrack != 0 && len(b) > 4+32 {
			caps := binary.LittleEndian.Uint32(b[4:8])
			b = bytes.Clone(b)
			binary.LittleEndian.PutUint32(b[4:8], caps|capSessionTrack)
			t.tracking = true
		}
	case t.tracking && len(b) == 4+1+6 && b[4] == comQuery && bytes.EqualFold(b[5:], []byte("COMMIT")):
		// Its reply is the next packet.
		t.want, t.hn, t.body, t.need = true, 0, t.body[:0], 0
	}
	return t.Conn.Write(b)
}

// scan follows one wanted packet through the bytes the driver read.
func (t *trackConn) scan(b []byte) {
	for len(b) > 0 && (!t.greeted || t.want) {
		if t.hn < 4 {
			k := copy(t.hdr[t.hn:], b)
			t.hn += k
			b = b[k:]
			if t.hn == 4 {
				t.need = int(t.hdr[0]) | int(t.hdr[1])<<8 | int(t.hdr[2])<<16
			}
			continue
		}
		k := min(len(b), t.need-len(t.body))
		t.body = append(t.body, b[:k]...)
		b = b[k:]
		if len(t.body) < t.need {
			return
		}
		if !t.greeted {
			t.greeting(t.body)
		} else {
			t.commitReply(t.body)
			t.want = false
		}
		t.hn, t.body = 0, t.body[:0]
	}
}

// greeting reads the server's capabilities and the connection id, and
// registers the connection.
func (t *trackConn) greeting(g []byte) {
	t.greeted = true
	if len(g) < 1 || g[0] != 10 {
		return
	}
	end := bytes.IndexByte(g[1:], 0)
	if end < 0 {
		return
	}
	p := 1 + end + 1
	if len(g) < p+4+8+1+2+1+2+2 {
		return
	}
	t.id = binary.LittleEndian.Uint32(g[p:])
	p += 4 + 8 + 1
	t.caps = uint32(binary.LittleEndian.Uint16(g[p:]))
	p += 2 + 1 + 2
	t.caps |= uint32(binary.LittleEndian.Uint16(g[p:])) << 16
	t.c.tracked.Store(trackKey{addr: t.addr, id: t.id}, t)
}

// commitReply reads last_gtid from a COMMIT's OK packet, when the session
// state says it changed.
func (t *trackConn) commitReply(p []byte) {
	if len(p) == 0 || p[0] != 0x00 {
		return // an error: nothing committed
	}
	p = p[1:]
	var ok bool
	for range 2 { // affected rows, last insert id
		if _, p, ok = lenencInt(p); !ok {
			return
		}
	}
	if len(p) < 4 {
		return
	}
	status := binary.LittleEndian.Uint16(p)
	p = p[4:] // status, warnings
	if status&statusStateChanged == 0 {
		return
	}
	if _, p, ok = lenencBytes(p); !ok { // info
		return
	}
	state, _, ok := lenencBytes(p)
	if !ok {
		return
	}
	for len(state) > 0 {
		typ := state[0]
		var data []byte
		if data, state, ok = lenencBytes(state[1:]); !ok {
			return
		}
		if typ != sessionTrackSysVars {
			continue
		}
		name, rest, ok := lenencBytes(data)
		if !ok || string(name) != "last_gtid" {
			continue
		}
		if v, _, ok := lenencBytes(rest); ok {
			if seq := gtidSeq(v, t.domain); seq > 0 {
				t.last.Store(seq)
			}
		}
	}
}

func (t *trackConn) Close() error {
	if t.greeted {
		t.c.tracked.Delete(trackKey{addr: t.addr, id: t.id})
	}
	return t.Conn.Close()
}

// SyscallConn passes the socket on: go-sql-driver checks a pooled
// connection's liveness on it before reuse (nothing is due then).
func (t *trackConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := t.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, fmt.Errorf("%T has no socket", t.Conn)
}

// lenencInt reads a length-encoded integer.
func lenencInt(p []byte) (uint64, []byte, bool) {
	if len(p) == 0 {
		return 0, nil, false
	}
	switch c := p[0]; {
	case c < 0xfb:
		return uint64(c), p[1:], true
	case c == 0xfc && len(p) >= 3:
		return uint64(binary.LittleEndian.Uint16(p[1:])), p[3:], true
	case c == 0xfd && len(p) >= 4:
		return uint64(p[1]) | uint64(p[2])<<8 | uint64(p[3])<<16, p[4:], true
	case c == 0xfe && len(p) >= 9:
		return binary.LittleEndian.Uint64(p[1:]), p[9:], true
	}
	return 0, nil, false
}

// lenencBytes reads a length-encoded string.
func lenencBytes(p []byte) (s, rest []byte, ok bool) {
	n, p, ok := lenencInt(p)
	if !ok || uint64(len(p)) < n {
		return nil, nil, false
	}
	return p[:n], p[n:], true
}
