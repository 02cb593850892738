package netcheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Server answers netcheck measurements in one namespace: a UDP echo and loss
// counter, and a TCP sink/source, on the same port number. It runs until
// Close or until the context given to StartServer is done.
type Server struct {
	addr netip.AddrPort
	ln   *net.TCPListener
	udp  *net.UDPConn

	ctx      context.Context // done when the server stops
	cancel   context.CancelFunc
	stopCtx  func() bool // stops watching StartServer's context
	wg       sync.WaitGroup
	shutOnce sync.Once

	mu      sync.Mutex
	conns   map[net.Conn]struct{}    // every open TCP connection
	pending map[uint64]chan net.Conn // throughput sessions waiting for their data connection
	loss    map[uint64]*lossSession  // loss sessions by token
	closed  bool
}

type lossSession struct {
	n        int
	bits     []byte // bit i set: sequence number i arrived
	received int
}

// StartServer listens on addr (in ns) on a free port number that is free for
// both UDP and TCP.
func StartServer(ctx context.Context, ns Netns, addr netip.Addr) (*Server, error) {
	addr = addr.Unmap()
	var ln *net.TCPListener
	var udp *net.UDPConn
	err := ns.Do(func() error {
		var lastErr error
		for range 64 {
			l, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
			if err != nil {
				return fmt.Errorf("listen tcp: %w", err)
			}
			port := l.Addr().(*net.TCPAddr).AddrPort().Port()
			u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, port)))
			if err != nil {
				_ = l.Close()
				lastErr = err
				if errors.Is(err, syscall.EADDRINUSE) {
					continue
				}
				return fmt.Errorf("listen udp: %w", err)
			}
			ln, udp = l, u
			return nil
		}
		return fmt.Errorf("no port free for both tcp and udp: %w", lastErr)
	})
	if err != nil {
		return nil, fmt.Errorf("netcheck server on %s: %w", addr, err)
	}
	_ = udp.SetReadBuffer(4 << 20) // capped by net.core.rmem_max; fewer drops at the host
	s := &Server{
		addr:    netip.AddrPortFrom(addr, ln.Addr().(*net.TCPAddr).AddrPort().Port()),
		ln:      ln,
		udp:     udp,
		conns:   map[net.Conn]struct{}{},
		pending: map[uint64]chan net.Conn{},
		loss:    map[uint64]*lossSession{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.stopCtx = context.AfterFunc(ctx, s.shutdown)
	s.wg.Add(2)
	go s.acceptLoop()
	go s.udpLoop()
	return s, nil
}

// Addr is where clients reach the server: the same port for UDP and TCP.
func (s *Server) Addr() netip.AddrPort { return s.addr }

// Close stops the server, closes every connection and waits for all of its
// goroutines. It is safe to call more than once.
func (s *Server) Close() error {
	s.stopCtx()
	s.shutdown()
	s.wg.Wait()
	return nil
}

func (s *Server) shutdown() {
	s.shutOnce.Do(func() {
		s.cancel()
		_ = s.ln.Close()
		_ = s.udp.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
	})
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.ctx.Err() != nil {
				return
			}
			// Transient (e.g. out of file descriptors): back off a little.
			select {
			case <-time.After(10 * time.Millisecond):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(c)
	}
}

// release closes a connection and forgets it.
func (s *Server) release(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

func (s *Server) newToken() uint64 {
	for {
		t := rand.Uint64()
		if _, ok := s.pending[t]; ok {
			continue
		}
		if _, ok := s.loss[t]; ok {
			continue
		}
		return t
	}
}

func (s *Server) handle(c net.Conn) {
	defer s.wg.Done()
	_ = c.SetDeadline(time.Now().Add(setupTimeout))
	op, err := readRequest(c)
	if err == nil {
		switch op {
		case opData:
			if s.attachData(c) {
				return // now owned by its throughput session
			}
			err = errors.New("no throughput session with that token")
		case opThroughput:
			err = s.serveThroughput(c)
		case opLoss:
			err = s.serveLoss(c)
		default:
			err = fmt.Errorf("unknown op %q", op)
		}
	}
	if err != nil && s.ctx.Err() == nil {
		// Best effort: the client may be gone already.
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write(errMsg(err.Error()))
	}
	s.release(c)
}

// attachData hands a data connection to the throughput session waiting for it.
func (s *Server) attachData(c net.Conn) bool {
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return false
	}
	s.mu.Lock()
	ch, ok := s.pending[binary.BigEndian.Uint64(b[:])]
	delete(s.pending, binary.BigEndian.Uint64(b[:]))
	s.mu.Unlock()
	if ok {
		ch <- c // buffered: never blocks
	}
	return ok
}

// awaitData waits for the data connection of session token.
func (s *Server) awaitData(token uint64, ch chan net.Conn) (net.Conn, error) {
	t := time.NewTimer(setupTimeout)
	defer t.Stop()
	select {
	case c := <-ch:
		return c, nil
	case <-t.C:
	case <-s.ctx.Done():
	}
	s.mu.Lock()
	_, waiting := s.pending[token]
	delete(s.pending, token)
	s.mu.Unlock()
	if !waiting { // attached meanwhile: the connection is (about to be) in ch
		return <-ch, nil
	}
	if s.ctx.Err() != nil {
		return nil, errors.New("server closed")
	}
	return nil, errors.New("data connection did not arrive")
}

func (s *Server) serveThroughput(c net.Conn) error {
	var req [17]byte
	if _, err := io.ReadFull(c, req[:]); err != nil {
		return fmt.Errorf("read throughput request: %w", err)
	}
	dir := Direction(req[0])
	warmup := time.Duration(binary.BigEndian.Uint64(req[1:9]))
	dur := time.Duration(binary.BigEndian.Uint64(req[9:17]))
	if err := checkWindow(dir, warmup, dur); err != nil {
		return err
	}
	b := newBound(s.ctx, warmup+dur+sessionSlack)

	s.mu.Lock()
	token := s.newToken()
	ch := make(chan net.Conn, 1)
	s.pending[token] = ch
	s.mu.Unlock()
	if _, err := c.Write(okMsg(u64(token))); err != nil {
		s.mu.Lock()
		delete(s.pending, token)
		s.mu.Unlock()
		return err
	}
	data, err := s.awaitData(token, ch)
	if err != nil {
		return err
	}
	defer s.release(data)
	_ = b.setDeadline(c, b.hard)
	_ = b.setDeadline(data, b.hard)

	if dir == Upload {
		n, window, err := receiveWindow(b, data, warmup, dur)
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		_, err = c.Write(okMsg(u64(uint64(n)), u64(uint64(window))))
		return err
	}

	sendErr := make(chan error, 1)
	go func() { sendErr <- sendBulk(data) }()
	var cmd [1]byte
	_, rerr := io.ReadFull(c, cmd[:])
	st, ierr := readTCPStats(data)
	discard(data)
	werr := <-sendErr
	switch {
	case rerr != nil:
		return fmt.Errorf("wait for stop: %w", rerr)
	case cmd[0] != cmdStop:
		return fmt.Errorf("expected stop, got %q", cmd[0])
	case ierr != nil:
		return fmt.Errorf("send (%v): %w", werr, ierr)
	}
	_, err = c.Write(okMsg(u32(st.Retrans), u32(st.RTTUs), u32(st.MinRTTUs)))
	return err
}

func (s *Server) serveLoss(c net.Conn) error {
	var req [16]byte
	if _, err := io.ReadFull(c, req[:]); err != nil {
		return fmt.Errorf("read loss request: %w", err)
	}
	n := int(binary.BigEndian.Uint32(req[0:4]))
	size := int(binary.BigEndian.Uint32(req[4:8]))
	pps := math.Float64frombits(binary.BigEndian.Uint64(req[8:16]))
	if err := checkLoss(n, size, pps); err != nil {
		return err
	}
	b := newBound(s.ctx, sendDuration(n, pps)+drainLimit+sessionSlack)

	sess := &lossSession{n: n, bits: make([]byte, (n+7)/8)}
	s.mu.Lock()
	token := s.newToken()
	s.loss[token] = sess
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.loss, token)
		s.mu.Unlock()
	}()
	_ = b.setDeadline(c, b.hard)
	if _, err := c.Write(okMsg(u64(token))); err != nil {
		return err
	}
	for {
		var cmd [1]byte
		if _, err := io.ReadFull(c, cmd[:]); err != nil {
			return fmt.Errorf("read command: %w", err)
		}
		switch cmd[0] {
		case cmdPoll:
			s.mu.Lock()
			got := sess.received
			s.mu.Unlock()
			if _, err := c.Write(okMsg(u32(uint32(got)))); err != nil {
				return err
			}
		case cmdReport:
			s.mu.Lock()
			bits := append([]byte(nil), sess.bits...)
			s.mu.Unlock()
			_, err := c.Write(okMsg(bits))
			return err
		default:
			return fmt.Errorf("unknown loss command %q", cmd[0])
		}
	}
}

func (s *Server) udpLoop() {
	defer s.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || s.ctx.Err() != nil {
				return
			}
			continue // e.g. a truncated read; the socket is still usable
		}
		p := buf[:n]
		if n < 5 || string(p[:4]) != udpMagic {
			continue
		}
		switch p[4] {
		case udpEcho:
			if n == echoLen {
				_, _ = s.udp.WriteToUDPAddrPort(p, from)
			}
		case udpLoss:
			if n < lossHeaderLen {
				continue
			}
			token := binary.BigEndian.Uint64(p[5:13])
			seq := int(binary.BigEndian.Uint32(p[13:17]))
			s.mu.Lock()
			if sess := s.loss[token]; sess != nil && seq < sess.n && sess.bits[seq/8]&(1<<(seq%8)) == 0 {
				sess.bits[seq/8] |= 1 << (seq % 8)
				sess.received++
			}
			s.mu.Unlock()
		}
	}
}
