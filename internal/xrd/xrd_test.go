package xrd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const pageSize = 8 << 10

// testData returns n deterministic pseudo-random bytes from seed.
func testData(seed uint64, n int) []byte {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b)
	return b
}

// dialServer opens a session to s, closed in t.Cleanup.
func dialServer(t *testing.T, ctx context.Context, s *server, dial DialFunc) *Conn {
	t.Helper()
	c, err := Dial(ctx, dial, s.addr, "replab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func openFile(t *testing.T, ctx context.Context, c *Conn, path string, want []byte) *File {
	t.Helper()
	f, err := c.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Size() != int64(len(want)) {
		t.Fatalf("Size() = %d, want %d", f.Size(), len(want))
	}
	return f
}

// checkRead reads len(p) bytes at off and checks count, error and bytes
// against the file contents want.
func checkRead(t *testing.T, ctx context.Context, f *File, want []byte, off int64, size int) {
	t.Helper()
	p := make([]byte, size)
	n, err := f.ReadAt(ctx, p, off)
	wantN := max(0, min(size, len(want)-int(min(off, int64(len(want))))))
	var wantErr error
	if wantN < size {
		wantErr = io.EOF
	}
	if n != wantN || err != wantErr {
		t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; want %d, %v", size, off, n, err, wantN, wantErr)
	}
	if wantN > 0 && !bytes.Equal(p[:n], want[off:off+int64(n)]) {
		t.Fatalf("ReadAt(%d bytes at %d): data differs from the file", size, off)
	}
}

func TestReadPages(t *testing.T) {
	// 9 MiB and a partial page: a whole-file read crosses the 8 MiB
	// request limit, and the last page is short.
	want := testData(1, 9<<20+3000)
	s := startServer(t, map[string][]byte{"db/pages.bin": want})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := dialServer(t, ctx, s, nil)
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	f := openFile(t, ctx, c, "/db/pages.bin", want)
	// Open took the size from its kXR_retstat answer; kXR_stat agrees.
	if size, err := f.stat(ctx); err != nil || size != int64(len(want)) {
		t.Fatalf("kXR_stat on the handle = %d, %v; want %d", size, err, len(want))
	}

	for off := int64(0); off < int64(len(want)); off += pageSize {
		checkRead(t, ctx, f, want, off, pageSize)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for range 300 {
		checkRead(t, ctx, f, want, rng.Int64N(int64(len(want))), 1+rng.IntN(64<<10))
	}
	checkRead(t, ctx, f, want, 0, len(want))               // whole file, two requests
	checkRead(t, ctx, f, want, 0, len(want)+5)             // whole file and past EOF
	checkRead(t, ctx, f, want, int64(len(want)), pageSize) // at EOF: 0, io.EOF
	checkRead(t, ctx, f, want, int64(len(want))+12345, 10) // beyond EOF
	if n, err := f.ReadAt(ctx, nil, 0); n != 0 || err != nil {
		t.Errorf("empty ReadAt = %d, %v; want 0, nil", n, err)
	}
	if _, err := f.ReadAt(ctx, make([]byte, 1), -1); err == nil {
		t.Error("ReadAt at a negative offset did not fail")
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Server errors carry the server's text and the request's context.
	_, err := c.Open(ctx, "/db/missing.bin")
	var se *ServerError
	if !errors.As(err, &se) || se.Code == 0 || !strings.Contains(strings.ToLower(se.Message), "no such file") {
		t.Fatalf("open of a missing file: %v (want a *ServerError saying no such file)", err)
	}
	if !strings.Contains(err.Error(), "/db/missing.bin") || !strings.Contains(err.Error(), s.addr) {
		t.Errorf("error %q does not name the path and server", err)
	}
	// The session survives a server error.
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentReadsOneConnection(t *testing.T) {
	want := testData(4, 6<<20+100)
	s := startServer(t, map[string][]byte{"pages.bin": want})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var dials atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	c := dialServer(t, ctx, s, dial)
	f := openFile(t, ctx, c, "/pages.bin", want)

	// Sample the established connections to the server and the requests
	// in flight while 16 goroutines read every page in random order.
	stop := make(chan struct{})
	var minConns, maxConns, samples, maxPending int
	var sampleErr error
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		minConns = 1 << 30
		for {
			n, err := establishedTo(s.port)
			if err != nil {
				sampleErr = err
				return
			}
			minConns, maxConns = min(minConns, n), max(maxConns, n)
			samples++
			c.mu.Lock()
			maxPending = max(maxPending, len(c.pending))
			c.mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()

	// Every page four times, in random order.
	npages := (len(want) + pageSize - 1) / pageSize
	pages := rand.New(rand.NewPCG(5, 6)).Perm(4 * npages)
	for i := range pages {
		pages[i] %= npages
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			p := make([]byte, pageSize)
			for {
				i := int(next.Add(1)) - 1
				if i >= len(pages) {
					return
				}
				off := int64(pages[i]) * pageSize
				n, err := f.ReadAt(ctx, p, off)
				end := min(off+pageSize, int64(len(want)))
				if (err != nil && !(err == io.EOF && end-off < pageSize)) || int64(n) != end-off {
					errs <- fmt.Errorf("ReadAt(page at %d) = %d, %v; want %d", off, n, err, end-off)
					return
				}
				if !bytes.Equal(p[:n], want[off:end]) {
					errs <- errors.New("page data differs from the file")
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	close(errs)
	for err := range errs {
		t.Errorf("concurrent read: %v", err)
	}
	if sampleErr != nil {
		t.Fatal(sampleErr)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dial called %d times, want 1", n)
	}
	if samples == 0 || minConns != 1 || maxConns != 1 {
		t.Errorf("established connections to port %d during the reads: min %d, max %d over %d samples; want exactly 1",
			s.port, minConns, maxConns, samples)
	}
	if maxPending < 2 {
		t.Errorf("at most %d requests were in flight; want several", maxPending)
	}
	t.Logf("%d page reads, %d samples, up to %d requests in flight on 1 connection", len(pages), samples, maxPending)
}

func TestServerKilled(t *testing.T) {
	want := testData(7, 1<<20)
	s := startServer(t, map[string][]byte{"f.bin": want})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := dialServer(t, ctx, s, nil)
	f := openFile(t, ctx, c, "/f.bin", want)
	checkRead(t, ctx, f, want, 0, pageSize)

	s.kill()
	rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
	defer rcancel()
	_, err := f.ReadAt(rctx, make([]byte, pageSize), pageSize)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadAt after the server was killed: %v; want a connection error before the deadline", err)
	}
	t.Logf("read after kill: %v", err)
	// Later calls fail at once with the same kind of error.
	if err := c.Ping(rctx); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Errorf("Ping after the server was killed: %v; want a broken-connection error", err)
	}
}

func TestTCPInfoAndCancel(t *testing.T) {
	want := testData(9, 2<<20)
	s := startServer(t, map[string][]byte{"f.bin": want})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := dialServer(t, ctx, s, nil)
	f := openFile(t, ctx, c, "/f.bin", want)
	for off := int64(0); off < 64*pageSize; off += pageSize {
		checkRead(t, ctx, f, want, off, pageSize)
	}
	ti, err := c.TCPInfo()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("TCP_INFO after 64 pages: %+v", ti)
	if ti.MSSBytes == 0 || ti.RTTMicros == 0 || ti.CwndSegments == 0 || ti.BytesAcked == 0 || ti.State != 1 {
		t.Errorf("TCPInfo = %+v; want non-zero MSS, RTT, cwnd, bytes acked and state 1 (established)", ti)
	}

	// With the server stopped, reads stay pending; their contexts end them.
	s.stop()
	stopped := true
	defer func() {
		if stopped {
			s.signal(syscall.SIGCONT)
		}
	}()
	late := bytes.Repeat([]byte{0xEE}, pageSize)
	dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer dcancel()
	if n, err := f.ReadAt(dctx, late, 0); n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadAt on a stopped server = %d, %v; want 0, context.DeadlineExceeded", n, err)
	}
	cctx, ccancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() {
		_, err := f.ReadAt(cctx, make([]byte, pageSize), pageSize)
		res <- err
	}()
	time.Sleep(100 * time.Millisecond)
	ccancel()
	select {
	case err := <-res:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled ReadAt = %v; want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled ReadAt did not return within 10 s")
	}

	// Resumed, the server answers the abandoned reads; the answers are
	// discarded (not written into the abandoned buffer) and the session
	// keeps working.
	s.signal(syscall.SIGCONT)
	stopped = false
	checkRead(t, ctx, f, want, 3*pageSize, pageSize)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		n := len(c.pending)
		c.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d abandoned requests still pending 10 s after the server resumed", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !bytes.Equal(late, bytes.Repeat([]byte{0xEE}, pageSize)) {
		t.Error("the late response was written into the abandoned buffer")
	}

	// Close fails a pending read at once, and later calls, with ErrClosed.
	// (The stopped server is killed by the cleanup; SIGKILL needs no SIGCONT.)
	s.stop()
	go func() {
		_, err := f.ReadAt(ctx, make([]byte, pageSize), 0)
		res <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("ReadAt pending during Close = %v; want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadAt pending during Close did not return within 10 s")
	}
	if _, err := f.ReadAt(ctx, make([]byte, 1), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadAt after Close = %v; want ErrClosed", err)
	}
	if _, err := c.TCPInfo(); err == nil {
		t.Error("TCPInfo after Close did not fail")
	}
}

// The tests below need no server: they run with -short too.

func TestTCPInfoLoopback(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	nc, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ti, err := (&Conn{nc: nc, addr: l.Addr().String()}).TCPInfo()
	if err != nil {
		t.Fatal(err)
	}
	if ti.State != 1 || ti.MSSBytes == 0 || ti.CwndSegments == 0 {
		t.Errorf("TCPInfo of a new loopback connection = %+v; want state 1, non-zero MSS and cwnd", ti)
	}
	p1, p2 := net.Pipe()
	defer p1.Close()
	defer p2.Close()
	if _, err := (&Conn{nc: p1, addr: "pipe"}).TCPInfo(); err == nil {
		t.Error("TCPInfo of a net.Pipe did not fail")
	}
}

// listen serves each accepted connection with serve on a loopback port.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer nc.Close(); serve(nc) })
		}
	})
	return l.Addr().String()
}

func TestDialErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	notXRootD := listen(t, func(nc net.Conn) {
		io.ReadFull(nc, make([]byte, 20))
		io.WriteString(nc, "HTTP/1.0 400 Bad Request\r\n\r\n")
	})
	_, err := Dial(ctx, nil, notXRootD, "replab")
	if err == nil || !strings.Contains(err.Error(), "xrootd handshake with "+notXRootD) || !strings.Contains(err.Error(), "not an XRootD server") {
		t.Errorf("Dial to an HTTP-like server: %v", err)
	}

	hangsUp := listen(t, func(nc net.Conn) {})
	if _, err := Dial(ctx, nil, hangsUp, "replab"); err == nil || !strings.Contains(err.Error(), "xrootd handshake with "+hangsUp) {
		t.Errorf("Dial to a server that hangs up: %v", err)
	}

	release := make(chan struct{})
	defer close(release)
	silent := listen(t, func(nc net.Conn) { <-release })
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer scancel()
	start := time.Now()
	if _, err := Dial(sctx, nil, silent, "replab"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial to a silent server: %v; want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Dial to a silent server returned after %v", d)
	}

	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	if _, err := Dial(ctx, nil, closed, "replab"); err == nil || !strings.Contains(err.Error(), "xrootd dial "+closed) {
		t.Errorf("Dial to a closed port: %v", err)
	}
}

func TestParseStatSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		size int64
		ok   bool
	}{
		{"42890690174189056 100000 48 1795449472\x00", 100000, true},
		{"1 0 48 17", 0, true},
		{"1 x 48 17", 0, false},
		{"1 -5 48 17", 0, false},
		{"1 2", 0, false},
	} {
		size, err := parseStatSize([]byte(tc.in))
		if (err == nil) != tc.ok || size != tc.size {
			t.Errorf("parseStatSize(%q) = %d, %v", tc.in, size, err)
		}
	}
}
