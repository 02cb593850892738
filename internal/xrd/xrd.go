// Package xrd is a small XRootD client that reads files over exactly one TCP
// connection, with any number of requests in flight on it.
//
// replab reproduces a study that read an object database in 8 KiB pages over a
// long-delay link: one request at a time wastes the link, several in flight
// fill it, and TCP slow start after losses makes periodic slow pages. To see
// those effects the client must own the one socket the pages travel on.
//
// We do not use the go-hep.org/x/hep/xrootd client: its File.ReadAt sends
// data requests over extra sub-session connections (kXR_bind, up to 8), which
// spreads the pages over several TCP connections and hides exactly the
// per-connection behaviour we measure, and it dials its own sockets, so we
// could neither dial from inside a network namespace nor read TCP_INFO.
//
// The protocol subset used here (handshake, kXR_protocol, kXR_login without
// authentication, kXR_open, kXR_stat, kXR_read, kXR_close, kXR_ping) follows
// the XRootD protocol specification: a request is a 24-byte header (2-byte
// stream id, 2-byte request id, 16 bytes of parameters, 4-byte data length)
// followed by its data; a response is an 8-byte header (stream id, status,
// data length) followed by its body. One reader goroutine per Conn matches
// responses to waiting requests by stream id.
package xrd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Request ids, response statuses and flags from the XRootD protocol
// specification (XProtocol.hh).
const (
	reqClose    = 3003
	reqProtocol = 3006
	reqLogin    = 3007
	reqOpen     = 3010
	reqPing     = 3011
	reqRead     = 3013
	reqStat     = 3017

	statusOK       = 0
	statusOKSoFar  = 4000
	statusAttn     = 4001
	statusError    = 4003
	statusRedirect = 4004
	statusWait     = 4005
	statusWaitResp = 4006

	attnAsynResp = 5008 // kXR_asynresp: the body embeds a deferred response

	openRead    = 0x0010 // kXR_open_read
	openRetStat = 0x0400 // kXR_retstat

	// clientProtocol is the protocol version we announce (3.1.0): plain
	// kXR_ok/kXR_oksofar read responses, no request signing.
	clientProtocol = 0x00000310
	capVersion     = 4 // kXR_ver004 login capability, no asynchronous responses

	maxReadRequest = 8 << 20  // bytes asked for by one kXR_read
	maxBody        = 64 << 20 // larger response bodies are a protocol error
)

// ErrClosed is wrapped by errors of calls on a Conn closed with Close.
var ErrClosed = errors.New("xrd: connection closed")

// ServerError is a kXR_error response: the server's error code and text.
type ServerError struct {
	Code    int32
	Message string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("server error %d: %s", e.Code, e.Message)
}

// Conn is one XRootD session on one TCP connection. Its methods are safe for
// concurrent use. Close it to stop its reader goroutine.
type Conn struct {
	nc   net.Conn
	addr string

	wmu sync.Mutex // serializes request writes

	mu      sync.Mutex
	pending map[uint16]*call // requests awaiting their final response
	nextID  uint16
	err     error // set once the connection is closed or broken

	readerDone chan struct{}
}

// call is one request in flight. The reader fills it under Conn.mu and
// closes done when the final response has arrived (or the connection broke).
type call struct {
	buf       []byte // destination of kXR_read data; nil: collect into body
	n         int    // bytes copied into buf
	body      []byte
	status    uint16
	err       error
	abandoned bool // the caller gave up; discard whatever arrives
	done      chan struct{}
}

// DialFunc dials a network connection, like net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dial opens one TCP connection to the XRootD server at addr (host:port) with
// dial (nil: a net.Dialer), performs the initial handshake, kXR_protocol and
// kXR_login as user (at most 8 bytes are sent) without authentication, and
// returns the ready session. ctx bounds the whole setup.
func Dial(ctx context.Context, dial DialFunc, addr, user string) (*Conn, error) {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("xrootd dial %s: %w", addr, err)
	}
	if err := handshake(ctx, nc); err != nil {
		nc.Close()
		return nil, fmt.Errorf("xrootd handshake with %s: %w", addr, err)
	}
	c := &Conn{
		nc:         nc,
		addr:       addr,
		pending:    make(map[uint16]*call),
		nextID:     1,
		readerDone: make(chan struct{}),
	}
	go c.readLoop()

	var p [16]byte
	binary.BigEndian.PutUint32(p[0:], clientProtocol)
	if _, err := c.roundTrip(ctx, reqProtocol, p, nil, nil); err != nil {
		c.Close()
		return nil, fmt.Errorf("xrootd protocol request to %s: %w", addr, err)
	}

	p = [16]byte{}
	binary.BigEndian.PutUint32(p[0:], uint32(os.Getpid()))
	copy(p[4:12], user)
	p[14] = capVersion
	cl, err := c.roundTrip(ctx, reqLogin, p, nil, nil)
	if err == nil && len(cl.body) > 16 {
		err = fmt.Errorf("server requires authentication (%q), which this client does not do",
			strings.TrimRight(string(cl.body[16:]), "\x00"))
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("xrootd login to %s as %q: %w", addr, user, err)
	}
	return c, nil
}

// handshake sends the 20-byte initial handshake and checks the server's reply.
func handshake(ctx context.Context, nc net.Conn) error {
	// Interrupt the I/O only once ctx is done, so that ctx.Err() says why.
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	var req [20]byte
	binary.BigEndian.PutUint32(req[12:], 4)
	binary.BigEndian.PutUint32(req[16:], 2012)
	if _, err := nc.Write(req[:]); err != nil {
		return ctxErr(ctx, err)
	}
	var resp [16]byte
	if _, err := io.ReadFull(nc, resp[:8]); err != nil {
		return ctxErr(ctx, err)
	}
	status, dlen := binary.BigEndian.Uint16(resp[2:]), binary.BigEndian.Uint32(resp[4:])
	if status != statusOK || dlen != 8 {
		return fmt.Errorf("unexpected reply (status %d, %d bytes): not an XRootD server?", status, dlen)
	}
	if _, err := io.ReadFull(nc, resp[8:]); err != nil {
		return ctxErr(ctx, err)
	}
	if !stop() {
		return ctx.Err()
	}
	return nc.SetDeadline(time.Time{})
}

// ctxErr prefers the context's error to the I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readLoop reads responses until the connection fails and hands each to the
// request waiting on its stream id.
func (c *Conn) readLoop() {
	defer close(c.readerDone)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var hdr [8]byte
	var scratch []byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			c.fail(err)
			return
		}
		dlen := binary.BigEndian.Uint32(hdr[4:])
		if dlen > maxBody {
			c.fail(fmt.Errorf("response body of %d bytes exceeds the %d-byte limit", dlen, maxBody))
			return
		}
		if cap(scratch) < int(dlen) {
			scratch = make([]byte, dlen)
		}
		body := scratch[:dlen]
		if _, err := io.ReadFull(br, body); err != nil {
			c.fail(err)
			return
		}
		c.dispatch(binary.BigEndian.Uint16(hdr[0:]), binary.BigEndian.Uint16(hdr[2:]), body)
	}
}

// dispatch delivers one response. body is only valid during the call.
func (c *Conn) dispatch(sid, status uint16, body []byte) {
	if status == statusAttn {
		// Only kXR_asynresp concerns a request: it embeds the deferred
		// response (after a kXR_waitresp). Other notices are ignored.
		if len(body) >= 16 && binary.BigEndian.Uint32(body) == attnAsynResp {
			in := body[8:]
			if n := binary.BigEndian.Uint32(in[4:]); uint64(n) <= uint64(len(in)-8) {
				c.dispatch(binary.BigEndian.Uint16(in[0:]), binary.BigEndian.Uint16(in[2:]), in[8:8+n])
			}
		}
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.pending[sid]
	if cl == nil {
		return // not ours (or already failed): nobody waits for it
	}
	switch status {
	case statusOK, statusOKSoFar:
		if !cl.abandoned {
			cl.take(body)
		}
		if status == statusOKSoFar {
			return // more to come
		}
	case statusWaitResp:
		return // the answer comes later in a kXR_attn kXR_asynresp
	default:
		if !cl.abandoned {
			cl.body = append(cl.body[:0], body...)
		}
	}
	delete(c.pending, sid)
	if !cl.abandoned {
		cl.status = status
		close(cl.done)
	}
}

// take adds a data chunk to the call's buffer (or body).
func (cl *call) take(b []byte) {
	if cl.buf == nil {
		cl.body = append(cl.body, b...)
		return
	}
	if len(b) > len(cl.buf)-cl.n {
		if cl.err == nil {
			cl.err = fmt.Errorf("server sent more data than requested (%d bytes)", len(cl.buf))
		}
		b = b[:len(cl.buf)-cl.n]
	}
	cl.n += copy(cl.buf[cl.n:], b)
}

// fail marks the connection broken, fails every pending request and closes
// the socket.
func (c *Conn) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("xrootd connection to %s broken: %w", c.addr, err)
	}
	for id, cl := range c.pending {
		delete(c.pending, id)
		if !cl.abandoned {
			cl.err = c.err
			close(cl.done)
		}
	}
	c.mu.Unlock()
	c.nc.Close()
}

// register reserves a free stream id for cl.
func (c *Conn) register(cl *call) (uint16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	for range 1 << 16 {
		id := c.nextID
		c.nextID++
		if id == 0 { // stream id 0 is left to the handshake
			continue
		}
		if _, busy := c.pending[id]; !busy {
			c.pending[id] = cl
			return id, nil
		}
	}
	return 0, errors.New("all stream ids in use")
}

// abandon gives up on a request: its id stays reserved until the final
// response arrives (so it cannot be confused with a later request), and the
// reader no longer touches the caller's buffer.
func (c *Conn) abandon(id uint16, cl *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[id] == cl {
		cl.abandoned = true
		cl.buf = nil
	}
}

// release frees the stream id of a request that was not sent.
func (c *Conn) release(id uint16, cl *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[id] == cl {
		delete(c.pending, id)
	}
}

// send writes one request. A write that fails after sending part of the
// request leaves the stream unframed, so it breaks the connection.
func (c *Conn) send(ctx context.Context, id, reqID uint16, params [16]byte, data []byte) error {
	msg := make([]byte, 24+len(data))
	binary.BigEndian.PutUint16(msg[0:], id)
	binary.BigEndian.PutUint16(msg[2:], reqID)
	copy(msg[4:20], params[:])
	binary.BigEndian.PutUint32(msg[20:], uint32(len(data)))
	copy(msg[24:], data)

	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	c.nc.SetWriteDeadline(time.Time{}) // only ctx interrupts the write
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.nc.SetWriteDeadline(time.Unix(1, 0))
		close(fired)
	})
	n, err := c.nc.Write(msg)
	if !stop() {
		<-fired
	}
	if err != nil {
		err = ctxErr(ctx, err)
		if n > 0 {
			c.fail(fmt.Errorf("writing request: %w", err))
		}
		return err
	}
	return nil
}

// roundTrip sends a request and waits for its final response: kXR_ok returns
// the call, kXR_error a *ServerError, kXR_wait sleeps and resends. buf, if not
// nil, receives the response data (see call.buf).
func (c *Conn) roundTrip(ctx context.Context, reqID uint16, params [16]byte, data, buf []byte) (*call, error) {
	for {
		cl := &call{buf: buf, done: make(chan struct{})}
		id, err := c.register(cl)
		if err != nil {
			return nil, err
		}
		if err := c.send(ctx, id, reqID, params, data); err != nil {
			c.release(id, cl) // nothing will answer it
			return nil, err
		}
		select {
		case <-cl.done:
		case <-ctx.Done():
			c.abandon(id, cl)
			return nil, ctx.Err()
		}
		if cl.err != nil {
			return nil, cl.err
		}
		switch cl.status {
		case statusOK:
			return cl, nil
		case statusError:
			return nil, parseError(cl.body)
		case statusWait:
			secs := 1
			if len(cl.body) >= 4 {
				secs = int(int32(binary.BigEndian.Uint32(cl.body)))
			}
			t := time.NewTimer(time.Duration(max(secs, 0)) * time.Second)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		case statusRedirect:
			return nil, fmt.Errorf("server redirects to %q; redirects are not supported",
				strings.TrimRight(string(cl.body[min(4, len(cl.body)):]), "\x00"))
		default:
			return nil, fmt.Errorf("unexpected response status %d", cl.status)
		}
	}
}

func parseError(b []byte) error {
	if len(b) < 4 {
		return &ServerError{Code: -1, Message: "malformed kXR_error response"}
	}
	return &ServerError{
		Code:    int32(binary.BigEndian.Uint32(b)),
		Message: strings.TrimRight(string(b[4:]), "\x00 \n"),
	}
}

// Ping sends kXR_ping and waits for the answer.
func (c *Conn) Ping(ctx context.Context) error {
	if _, err := c.roundTrip(ctx, reqPing, [16]byte{}, nil, nil); err != nil {
		return fmt.Errorf("xrootd ping %s: %w", c.addr, err)
	}
	return nil
}

// Close closes the connection; pending and later calls fail with an error
// wrapping ErrClosed. It waits for the reader goroutine to finish.
func (c *Conn) Close() error {
	c.mu.Lock()
	first := c.err == nil
	if first {
		c.err = fmt.Errorf("xrootd connection to %s: %w", c.addr, ErrClosed)
	}
	c.mu.Unlock()
	err := c.nc.Close()
	<-c.readerDone
	if !first {
		return nil
	}
	return err
}

// File is a file opened read-only on a Conn.
type File struct {
	c    *Conn
	path string
	fh   [4]byte
	size int64
}

// Open opens path read-only (kXR_open with kXR_open_read and kXR_retstat).
func (c *Conn) Open(ctx context.Context, path string) (*File, error) {
	var p [16]byte
	binary.BigEndian.PutUint16(p[2:], openRead|openRetStat)
	cl, err := c.roundTrip(ctx, reqOpen, p, []byte(path), nil)
	if err == nil && len(cl.body) < 4 {
		err = fmt.Errorf("short open response (%d bytes)", len(cl.body))
	}
	if err != nil {
		return nil, fmt.Errorf("xrootd open %s on %s: %w", path, c.addr, err)
	}
	f := &File{c: c, path: path}
	copy(f.fh[:], cl.body)
	// The body is the handle, then compression info (8 bytes), then the
	// stat text if the server honoured kXR_retstat.
	if len(cl.body) > 12 {
		f.size, err = parseStatSize(cl.body[12:])
	} else {
		f.size, err = f.stat(ctx)
	}
	if err != nil {
		f.Close(ctx)
		return nil, fmt.Errorf("xrootd stat %s on %s: %w", path, c.addr, err)
	}
	return f, nil
}

// stat asks the server for the open file's size (kXR_stat on the handle).
func (f *File) stat(ctx context.Context) (int64, error) {
	var p [16]byte
	copy(p[12:], f.fh[:])
	cl, err := f.c.roundTrip(ctx, reqStat, p, nil, nil)
	if err != nil {
		return 0, err
	}
	return parseStatSize(cl.body)
}

// parseStatSize returns the size field of a stat text "id size flags mtime".
func parseStatSize(b []byte) (int64, error) {
	s := strings.TrimRight(string(b), "\x00")
	fields := strings.Fields(s)
	if len(fields) < 4 {
		return 0, fmt.Errorf("malformed stat information %q", s)
	}
	size, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || size < 0 {
		return 0, fmt.Errorf("malformed size in stat information %q", s)
	}
	return size, nil
}

// Size is the file's size in bytes when it was opened.
func (f *File) Size() int64 { return f.size }

// ReadAt reads len(p) bytes at offset off, with io.ReaderAt's contract: if it
// returns n < len(p), err says why, and it is io.EOF when the end of the file
// was reached (a read ending exactly at the end returns len(p), nil). A read
// entirely past the end returns 0, io.EOF. Each call is
// one kXR_read request (or several sequential ones above 8 MiB), so
// concurrent calls from many goroutines are that many requests in flight on
// the one connection. If ctx ends first, ReadAt returns ctx.Err() at once and
// the late response is discarded; p is not written after ReadAt returns.
func (f *File) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("xrootd read %s: negative offset %d", f.path, off)
	}
	n := 0
	for n < len(p) {
		chunk := p[n:min(len(p), n+maxReadRequest)]
		var params [16]byte
		copy(params[0:4], f.fh[:])
		binary.BigEndian.PutUint64(params[4:], uint64(off)+uint64(n))
		binary.BigEndian.PutUint32(params[12:], uint32(len(chunk)))
		cl, err := f.c.roundTrip(ctx, reqRead, params, nil, chunk)
		if err != nil {
			if errors.Is(err, ctx.Err()) {
				return n, err
			}
			return n, fmt.Errorf("xrootd read %s at %d (%d bytes) on %s: %w",
				f.path, off+int64(n), len(chunk), f.c.addr, err)
		}
		n += cl.n
		if cl.n < len(chunk) {
			return n, io.EOF
		}
	}
	return n, nil
}

// Close closes the file on the server (kXR_close).
func (f *File) Close(ctx context.Context) error {
	var p [16]byte
	copy(p[:4], f.fh[:])
	if _, err := f.c.roundTrip(ctx, reqClose, p, nil, nil); err != nil {
		return fmt.Errorf("xrootd close %s on %s: %w", f.path, f.c.addr, err)
	}
	return nil
}

// TCPInfo is the part of the connection's Linux TCP_INFO that replab
// reports.
type TCPInfo struct {
	State            uint8  // tcpi_state (1: established)
	CAState          uint8  // tcpi_ca_state: 0 open, 1 disorder, 2 cwr, 3 recovery, 4 loss
	CwndSegments     uint32 // tcpi_snd_cwnd
	SsthreshSegments uint32 // tcpi_snd_ssthresh
	MSSBytes         uint32 // tcpi_snd_mss
	RTTMicros        uint32 // tcpi_rtt (smoothed)
	RTTVarMicros     uint32 // tcpi_rttvar
	Retransmits      uint32 // tcpi_total_retrans (over the connection's life)
	LostPackets      uint32 // tcpi_lost (currently presumed lost)
	BytesAcked       uint64 // tcpi_bytes_acked (sent by us and acknowledged)
	DeliveryRateBps  uint64 // tcpi_delivery_rate, in bytes per second
}

// TCPInfo reads TCP_INFO from the connection's socket. It needs the dial
// function to have returned a *net.TCPConn or another syscall.Conn.
func (c *Conn) TCPInfo() (TCPInfo, error) {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return TCPInfo{}, fmt.Errorf("xrootd connection to %s: TCP_INFO: %T has no SyscallConn", c.addr, c.nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return TCPInfo{}, fmt.Errorf("xrootd connection to %s: TCP_INFO: %w", c.addr, err)
	}
	var ti *unix.TCPInfo
	var serr error
	if err := rc.Control(func(fd uintptr) {
		ti, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		serr = err
	}
	if serr != nil {
		return TCPInfo{}, fmt.Errorf("xrootd connection to %s: TCP_INFO: %w", c.addr, serr)
	}
	return FromUnix(ti), nil
}

// FromUnix keeps the part of a kernel tcp_info that replab reports: the
// client's own (TCPInfo) or the server's, read through sock_diag.
func FromUnix(ti *unix.TCPInfo) TCPInfo {
	return TCPInfo{
		State:            ti.State,
		CAState:          ti.Ca_state,
		CwndSegments:     ti.Snd_cwnd,
		SsthreshSegments: ti.Snd_ssthresh,
		MSSBytes:         ti.Snd_mss,
		RTTMicros:        ti.Rtt,
		RTTVarMicros:     ti.Rttvar,
		Retransmits:      ti.Total_retrans,
		LostPackets:      ti.Lost,
		BytesAcked:       ti.Bytes_acked,
		DeliveryRateBps:  ti.Delivery_rate,
	}
}

// LocalAddr is the client's end of the connection.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// RemoteAddr is the server's end of the connection.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }
