package bdbje

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"

	"replab/internal/engine"
)

// The client side of the node program's protocol (docs/bdbje.md): frames
// of a big-endian u32 length, an op byte and its payload; answers of a
// status byte ('K' or 'E') and a payload.

// Ops.
const (
	opPing     = 'P'
	opInsert   = 'I'
	opGet      = 'G'
	opRead     = 'Q'
	opAcks     = 'J'
	opLag      = 'L'
	opResetLag = 'R'
	opState    = 'S'
	opChecksum = 'H'
)

// maxFrame bounds an answer's size: a state or a batch of lag stamps is
// far smaller; anything bigger is a broken stream.
const maxFrame = 64 << 20

// Error is a failure the node answered with: its code (docs/bdbje.md
// lists them) and message.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("bdbje %s: %s", e.Code, e.Msg) }

// Error codes a client acts on.
const (
	codeReplica              = "replica"
	codeUnknownMaster        = "unknown-master"
	codeInsufficientAcks     = "insufficient-acks"
	codeInsufficientReplicas = "insufficient-replicas"
	codeLockTimeout          = "lock-timeout"
	codeConsistency          = "consistency"
	codeCommitUnknown        = "commit-unknown"
	codeBadRequest           = "bad-request"
	codeOther                = "other"
)

// notCommitted are the codes of a put refused before its commit record
// was written: nothing of it committed. After insufficient-acks (written,
// not acknowledged) and commit-unknown the outcome is unknown.
var notCommitted = map[string]bool{
	codeReplica: true, codeUnknownMaster: true, codeInsufficientReplicas: true, codeLockTimeout: true,
	codeConsistency: true, codeBadRequest: true, codeOther: true,
}

// Is makes a refusal before the commit match engine.ErrNotCommitted.
func (e *Error) Is(target error) bool {
	return target == engine.ErrNotCommitted && notCommitted[e.Code]
}

// IsCode says whether err is a node's answer with that code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// conn is one connection to a node's client port; one goroutine uses it.
type conn struct {
	c   net.Conn
	r   *bufio.Reader
	w   *bufio.Writer
	buf []byte // the request being built
}

// dial connects to addr with dial.
func dial(ctx context.Context, dialer func(ctx context.Context, network, addr string) (net.Conn, error), addr string) (*conn, error) {
	c, err := dialer(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &conn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}, nil
}

func (c *conn) Close() error { return c.c.Close() }

// begin starts a request of op.
func (c *conn) begin(op byte) {
	c.buf = append(c.buf[:0], 0, 0, 0, 0, op)
}

func (c *conn) u16(v int)   { c.buf = binary.BigEndian.AppendUint16(c.buf, uint16(v)) }
func (c *conn) u32(v int)   { c.buf = binary.BigEndian.AppendUint32(c.buf, uint32(v)) }
func (c *conn) i64(v int64) { c.buf = binary.BigEndian.AppendUint64(c.buf, uint64(v)) }

// call sends the request begun and returns the answer's payload (valid
// until the next call). beforeSend, if set, runs just before the request
// leaves. ctx's deadline and cancellation bound the exchange: a
// cancelled exchange leaves the connection unusable (close it).
func (c *conn) call(ctx context.Context, beforeSend func()) ([]byte, error) {
	binary.BigEndian.PutUint32(c.buf, uint32(len(c.buf)-4))
	if dl, ok := ctx.Deadline(); ok {
		_ = c.c.SetDeadline(dl)
	} else {
		_ = c.c.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if beforeSend != nil {
		beforeSend()
	}
	if _, err := c.w.Write(c.buf); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	if err := c.w.Flush(); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 1 || n > maxFrame {
		return nil, fmt.Errorf("bdbje: answer of %d bytes: the stream is broken", n)
	}
	if cap(c.buf) < int(n) {
		c.buf = make([]byte, n)
	}
	body := c.buf[:n]
	if _, err := io.ReadFull(c.r, body); err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	switch body[0] {
	case 'K':
		return body[1:], nil
	case 'E':
		return nil, decodeError(body[1:])
	}
	return nil, fmt.Errorf("bdbje: answer with status %q: the stream is broken", body[0])
}

// ctxErr prefers the context's error to the I/O error it caused.
func (c *conn) ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

func decodeError(p []byte) error {
	if len(p) < 2 {
		return &Error{Code: "other", Msg: "malformed error answer"}
	}
	n := int(binary.BigEndian.Uint16(p))
	if len(p) < 2+n {
		return &Error{Code: "other", Msg: "malformed error answer"}
	}
	return &Error{Code: string(p[2 : 2+n]), Msg: string(p[2+n:])}
}

// insertReq is one insert: records, and what the same transaction
// carries — the lag stamp of writer at seq when writer >= 0, the
// acknowledged-commits journal's key when ackSeq > 0.
type insertReq struct {
	recs    []engine.KVRecord
	writer  int
	seq     int64
	jwriter int
	ackSeq  int64
}

// insert puts req's records in one transaction and returns the commit's
// VLSN and CommitToken (nil when the node gave none).
func (c *conn) insert(ctx context.Context, req insertReq, beforeSend func()) (vlsn int64, token []byte, err error) {
	c.begin(opInsert)
	c.u32(req.writer)
	c.i64(req.seq)
	c.u32(req.jwriter)
	c.i64(req.ackSeq)
	c.u32(len(req.recs))
	for _, r := range req.recs {
		c.u16(len(r.Key))
		c.buf = append(c.buf, r.Key...)
		c.u32(len(r.Value))
		c.buf = append(c.buf, r.Value...)
	}
	p, err := c.call(ctx, beforeSend)
	if err != nil {
		return 0, nil, err
	}
	if len(p) < 14 {
		return 0, nil, fmt.Errorf("bdbje: insert answered %d bytes, want at least 14", len(p))
	}
	if n := binary.BigEndian.Uint32(p); int(n) != len(req.recs) {
		return 0, nil, fmt.Errorf("bdbje: insert stored %d records of %d", n, len(req.recs))
	}
	vlsn = int64(binary.BigEndian.Uint64(p[4:]))
	tlen := int(binary.BigEndian.Uint16(p[12:]))
	if len(p) != 14+tlen {
		return 0, nil, fmt.Errorf("bdbje: insert answered %d bytes for a token of %d", len(p), tlen)
	}
	if tlen > 0 {
		token = append([]byte(nil), p[14:]...)
	}
	return vlsn, token, nil
}

// Consistency policies on the wire.
const (
	policyNone   = 'N'
	policyTime   = 'T'
	policyCommit = 'C'
)

// readReq is one read: keys, where (masterOnly: refused unless the node is
// master), and the consistency policy a replica meets first.
type readReq struct {
	keys       [][]byte
	masterOnly bool
	policy     byte
	timeout    time.Duration
	maxLag     time.Duration
	token      []byte // policyCommit's; nil: wait for nothing
}

// read reads req's keys in one read-only transaction: each key's value,
// nil when absent.
func (c *conn) read(ctx context.Context, req readReq) ([][]byte, error) {
	c.begin(opRead)
	var flags byte
	if req.masterOnly {
		flags |= 1
	}
	c.buf = append(c.buf, flags, req.policy)
	c.u32(int(min(req.timeout.Milliseconds(), math.MaxUint32)))
	c.i64(req.maxLag.Milliseconds())
	c.u16(len(req.token))
	c.buf = append(c.buf, req.token...)
	c.u32(len(req.keys))
	for _, k := range req.keys {
		c.u16(len(k))
		c.buf = append(c.buf, k...)
	}
	p, err := c.call(ctx, nil)
	if err != nil {
		return nil, err
	}
	if len(p) < 4 || int(binary.BigEndian.Uint32(p)) != len(req.keys) {
		return nil, fmt.Errorf("bdbje: malformed read answer for %d keys", len(req.keys))
	}
	out := make([][]byte, len(req.keys))
	p = p[4:]
	for i := range out {
		if len(p) < 1 {
			return nil, errors.New("bdbje: read answer cut short")
		}
		found := p[0]
		p = p[1:]
		if found == 0 {
			continue
		}
		if len(p) < 4 {
			return nil, errors.New("bdbje: read answer cut short")
		}
		n := int(binary.BigEndian.Uint32(p))
		if len(p) < 4+n {
			return nil, errors.New("bdbje: read answer cut short")
		}
		out[i] = append(make([]byte, 0, n), p[4:4+n]...)
		p = p[4+n:]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("bdbje: %d bytes after the read answer", len(p))
	}
	return out, nil
}

// journalEach calls f with every acknowledged-commits journal key the node holds.
func (c *conn) journalEach(ctx context.Context, f func(writer int, seq int64)) error {
	c.begin(opAcks)
	p, err := c.call(ctx, nil)
	if err != nil {
		return err
	}
	if len(p) < 4 {
		return errors.New("bdbje: malformed journal answer")
	}
	n := int(binary.BigEndian.Uint32(p))
	if len(p) != 4+12*n {
		return fmt.Errorf("bdbje: journal answer of %d bytes for %d keys", len(p), n)
	}
	for i := range n {
		e := p[4+12*i:]
		f(int(int32(binary.BigEndian.Uint32(e))), int64(binary.BigEndian.Uint64(e[4:])))
	}
	return nil
}

// lagEach calls f with every stamp the node holds.
func (c *conn) lagEach(ctx context.Context, f func(writer int, seq int64)) error {
	c.begin(opLag)
	p, err := c.call(ctx, nil)
	if err != nil {
		return err
	}
	if len(p) < 4 {
		return errors.New("bdbje: malformed lag answer")
	}
	n := int(binary.BigEndian.Uint32(p))
	if len(p) != 4+12*n {
		return fmt.Errorf("bdbje: lag answer of %d bytes for %d stamps", len(p), n)
	}
	for i := range n {
		e := p[4+12*i:]
		f(int(int32(binary.BigEndian.Uint32(e))), int64(binary.BigEndian.Uint64(e[4:])))
	}
	return nil
}

// resetLag sets writers 0..writers-1 to 0 (at the master).
func (c *conn) resetLag(ctx context.Context, writers int) error {
	c.begin(opResetLag)
	c.u32(writers)
	_, err := c.call(ctx, nil)
	return err
}

// nodeState is the state op's answer.
type nodeState struct {
	Node          string                  `json:"node"`
	State         string                  `json:"state"` // MASTER, REPLICA, UNKNOWN, DETACHED
	Master        string                  `json:"master"`
	Group         string                  `json:"group"`
	VLSN          int64                   `json:"vlsn"`
	Replicas      map[string]replicaState `json:"replicas"`
	HeapUsedBytes int64                   `json:"heap_used_bytes"`
	HeapMaxBytes  int64                   `json:"heap_max_bytes"`
	GCCount       int64                   `json:"gc_count"`
	GCTimeMs      int64                   `json:"gc_time_ms"`
}

type replicaState struct {
	VLSN    int64 `json:"vlsn"`
	LagVLSN int64 `json:"lag_vlsn"`
}

// Node states.
const (
	stateMaster  = "MASTER"
	stateReplica = "REPLICA"
)

func (c *conn) state(ctx context.Context) (*nodeState, error) {
	c.begin(opState)
	p, err := c.call(ctx, nil)
	if err != nil {
		return nil, err
	}
	var st nodeState
	if err := json.Unmarshal(p, &st); err != nil {
		return nil, fmt.Errorf("bdbje: state answer: %w", err)
	}
	return &st, nil
}

// checksum is the number of records of kv and the sum of their hashes.
func (c *conn) checksum(ctx context.Context) (records, sum int64, err error) {
	c.begin(opChecksum)
	p, err := c.call(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	if len(p) != 16 {
		return 0, 0, fmt.Errorf("bdbje: checksum answered %d bytes, want 16", len(p))
	}
	return int64(binary.BigEndian.Uint64(p)), int64(binary.BigEndian.Uint64(p[8:])), nil
}
