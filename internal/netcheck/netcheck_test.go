package netcheck

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// noLeaks fails the test if it leaves more goroutines behind than it found
// once they have had 10 s to end (a bound for a busy machine, not a
// tolerance: they end within microseconds of being told).
func noLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		var now int
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if now = runtime.NumGoroutine(); now <= before {
				return
			}
		}
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d before, %d after\n%s", before, now, buf[:runtime.Stack(buf, true)])
	})
}

func startServer(t *testing.T, addr netip.Addr) *Server {
	t.Helper()
	srv, err := StartServer(context.Background(), Host{}, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// TestRTTOnLoopback: every probe comes back and the statistics are
// consistent. How fast loopback is belongs to make bench (a busy machine
// has shown a 311 ms median); no round trip can outlast the call.
func TestRTTOnLoopback(t *testing.T) {
	noLeaks(t)
	srv := startServer(t, loopback)
	start := time.Now()
	res, err := RTT(context.Background(), Host{}, srv.Addr(), 20, 2*time.Millisecond)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 20 || res.Received != 20 || len(res.SamplesMs) != 20 {
		t.Fatalf("sent %d, received %d, %d samples; want 20 each", res.Sent, res.Received, len(res.SamplesMs))
	}
	if !(0 < res.MinMs && res.MinMs <= res.P50Ms && res.P50Ms <= res.P99Ms && res.P99Ms <= res.MaxMs) {
		t.Errorf("statistics out of order: %+v", res)
	}
	if res.MeanMs < res.MinMs || res.MeanMs > res.MaxMs {
		t.Errorf("mean %v outside [min %v, max %v]", res.MeanMs, res.MinMs, res.MaxMs)
	}
	if max := float64(took) / 1e6; res.MaxMs > max {
		t.Errorf("largest RTT %.3f ms, longer than the whole call (%.3f ms)", res.MaxMs, max)
	}
}

// delayedEcho echoes every UDP datagram sent to it, delay later.
func delayedEcho(t *testing.T, delay time.Duration) netip.AddrPort {
	t.Helper()
	u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := u.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			p := append([]byte(nil), buf[:n]...)
			time.AfterFunc(delay, func() { _, _ = u.WriteToUDPAddrPort(p, from) })
		}
	}()
	t.Cleanup(func() {
		_ = u.Close()
		<-done
	})
	return u.LocalAddr().(*net.UDPAddr).AddrPort()
}

// TestRTTCountsTheWholeRoundTrip: behind an echo that answers 20 ms late,
// no round trip is shorter than 20 ms (exact: a timer never fires early)
// or longer than the call.
func TestRTTCountsTheWholeRoundTrip(t *testing.T) {
	const delay = 20 * time.Millisecond
	a := delayedEcho(t, delay)
	start := time.Now()
	res, err := RTT(context.Background(), Host{}, a, 10, 5*time.Millisecond)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Received != 10 {
		t.Fatalf("received %d of 10", res.Received)
	}
	if res.MinMs < float64(delay)/1e6 || res.MaxMs > float64(took)/1e6 {
		t.Errorf("RTT min %.3f max %.3f ms, want ≥ %s and at most the call's %s", res.MinMs, res.MaxMs, delay, took)
	}
}

func TestRTTOverIPv6Loopback(t *testing.T) {
	addr := netip.MustParseAddr("::1")
	ln, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	_ = ln.Close()
	noLeaks(t)
	srv := startServer(t, addr)
	res, err := RTT(context.Background(), Host{}, srv.Addr(), 5, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Received != 5 {
		t.Errorf("received %d of 5", res.Received)
	}
}

func TestRTTToClosedPortFails(t *testing.T) {
	noLeaks(t)
	srv := startServer(t, loopback)
	addr := srv.Addr()
	_ = srv.Close()
	start := time.Now()
	// 1000 probes take 10 s to send: one that only noticed at the end
	// would take that long (an RTT that never noticed returns no error).
	_, err := RTT(context.Background(), Host{}, addr, 1000, 10*time.Millisecond)
	if err == nil {
		t.Fatal("RTT to a closed port succeeded")
	}
	if want := "rtt probe to " + addr.String(); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s to notice the port is closed", d)
	}
}

// TestThroughputOnLoopback: the measured window is the duration asked
// for, give or take how late the reader wakes at its edges (hundreds of
// ms on a busy machine: it opens late only if no byte was in flight, and
// closes late), and leaves out the 1 s warmup, which would make it 1.5 s
// or more; the call lasts no less than warmup + duration.
func TestThroughputOnLoopback(t *testing.T) {
	const warmup, d = time.Second, 500 * time.Millisecond
	const early, late = 300 * time.Millisecond, 700 * time.Millisecond
	for _, dir := range []Direction{Upload, Download} {
		t.Run(dir.String(), func(t *testing.T) {
			noLeaks(t)
			srv := startServer(t, loopback)
			start := time.Now()
			res, err := Throughput(context.Background(), Host{}, srv.Addr(), dir, warmup, d)
			took := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v in %s", res, took)
			if res.Bytes <= 0 || res.GoodputBps <= 0 {
				t.Errorf("no goodput: %+v", res)
			}
			if got := res.Seconds; got < (d-early).Seconds() || got > (d+late).Seconds() {
				t.Errorf("measured window %.3f s, want %s - %s + %s (without the %s warmup)", got, d, early, late, warmup)
			}
			if took < warmup+d || took > warmup+d+10*time.Second {
				t.Errorf("call took %s, want a little over %s", took, warmup+d)
			}
			if res.Direction != dir {
				t.Errorf("direction %s, want %s", res.Direction, dir)
			}
			if res.KernelRTTMs <= 0 {
				t.Errorf("kernel RTT %v ms, want > 0 from TCP_INFO", res.KernelRTTMs)
			}
		})
	}
}

func TestThroughputWithoutWarmup(t *testing.T) {
	noLeaks(t)
	srv := startServer(t, loopback)
	res, err := Throughput(context.Background(), Host{}, srv.Addr(), Upload, 0, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// A late reader shortens the window by its lateness at the opening
	// and lengthens it by its lateness at the closing.
	if res.Bytes <= 0 || res.Seconds <= 0 || res.Seconds > 0.1+0.7 {
		t.Errorf("got %+v", res)
	}
}

func TestLossOnLoopback(t *testing.T) {
	noLeaks(t)
	srv := startServer(t, loopback)
	res, err := Loss(context.Background(), Host{}, srv.Addr(), 1000, 200, 5000)
	if err != nil {
		t.Fatal(err)
	}
	// Paced on absolute deadlines: never faster than the rate (exact),
	// late by at most the longest stall of a busy machine.
	if s := res.SendSeconds; s < 0.1997 || s > 2 {
		t.Errorf("sending 1000 datagrams at 5000/s took %.3f s, want about 0.2 s", s)
	}
	res.SendSeconds = 0
	if want := (LossResult{Sent: 1000, Received: 1000}); res != want {
		t.Errorf("got %+v, want %+v", res, want)
	}
}

func TestInvalidArgumentsAreRejected(t *testing.T) {
	srv := startServer(t, loopback)
	ctx, a := context.Background(), srv.Addr()
	tests := []struct {
		name string
		run  func() error
	}{
		{"rtt with no probes", func() error { _, err := RTT(ctx, Host{}, a, 0, time.Millisecond); return err }},
		{"rtt with a negative interval", func() error { _, err := RTT(ctx, Host{}, a, 1, -time.Millisecond); return err }},
		{"throughput with no duration", func() error { _, err := Throughput(ctx, Host{}, a, Upload, 0, 0); return err }},
		{"throughput with no direction", func() error { _, err := Throughput(ctx, Host{}, a, 0, 0, time.Second); return err }},
		{"loss with datagrams smaller than the header", func() error { _, err := Loss(ctx, Host{}, a, 10, MinLossSize-1, 100); return err }},
		{"loss with no rate", func() error { _, err := Loss(ctx, Host{}, a, 10, 100, 0); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.run(); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestServerRejectsGarbage(t *testing.T) {
	noLeaks(t)
	srv := startServer(t, loopback)
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := readReply(c, 0); err == nil || !strings.Contains(err.Error(), "server:") {
		t.Errorf("got %v, want an error from the server", err)
	}
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("after the error: read %d bytes, want the connection closed", n)
	}
}

// cancelBound is how soon after start a cancelled or timed-out call must
// have returned: far beyond any stall of a busy machine, far below the
// ≥ 10 s each call below takes (or the 10 s setup timeout it waits) when
// it ignores its context.
const cancelBound = 5 * time.Second

func TestCancellationStopsPromptly(t *testing.T) {
	tests := []struct {
		name string
		run  func(ctx context.Context, a netip.AddrPort) error
	}{
		{"rtt", func(ctx context.Context, a netip.AddrPort) error {
			_, err := RTT(ctx, Host{}, a, 1000, 10*time.Millisecond)
			return err
		}},
		{"throughput upload", func(ctx context.Context, a netip.AddrPort) error {
			_, err := Throughput(ctx, Host{}, a, Upload, 0, 10*time.Second)
			return err
		}},
		{"throughput download", func(ctx context.Context, a netip.AddrPort) error {
			_, err := Throughput(ctx, Host{}, a, Download, time.Second, 10*time.Second)
			return err
		}},
		{"loss", func(ctx context.Context, a netip.AddrPort) error {
			_, err := Loss(ctx, Host{}, a, 100000, 100, 1000)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" on cancel", func(t *testing.T) {
			noLeaks(t)
			srv := startServer(t, loopback)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			start := time.Now()
			err := tt.run(ctx, srv.Addr())
			if took := time.Since(start); took > cancelBound {
				t.Errorf("returned %s after start, want soon after the cancel at 100 ms", took)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		})
		t.Run(tt.name+" at the context's deadline", func(t *testing.T) {
			noLeaks(t)
			srv := startServer(t, loopback)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := tt.run(ctx, srv.Addr())
			if took := time.Since(start); took > cancelBound {
				t.Errorf("returned %s after start, want soon after the deadline at 100 ms", took)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want context.DeadlineExceeded", err)
			}
		})
		t.Run(tt.name+" with a done context", func(t *testing.T) {
			noLeaks(t)
			srv := startServer(t, loopback)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := tt.run(ctx, srv.Addr()); !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		})
	}
}

func TestServerCloseReleasesPorts(t *testing.T) {
	noLeaks(t)
	srv, err := StartServer(context.Background(), Host{}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	// Leave a session mid-flight: Close must end it too.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Throughput(ctx, Host{}, srv.Addr(), Download, 0, time.Minute)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("throughput survived the server's Close")
		}
	case <-time.After(10 * time.Second): // a bound: it would run a minute
		t.Fatal("throughput still running 10 s after the server closed")
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	a := srv.Addr()
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(a))
	if err != nil {
		t.Fatalf("tcp port still taken: %v", err)
	}
	_ = ln.Close()
	u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(a))
	if err != nil {
		t.Fatalf("udp port still taken: %v", err)
	}
	_ = u.Close()
}

func TestServerStopsWithItsContext(t *testing.T) {
	noLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := StartServer(ctx, Host{}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	// The server stops asynchronously: soon, however busy the machine.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, err := RTT(context.Background(), Host{}, srv.Addr(), 1, 0)
		if err != nil || res.Received == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server still answers 10 s after its context was cancelled")
		}
	}
	_ = srv.Close()
}

// silentServer accepts TCP connections and UDP datagrams on one port and
// never answers.
func silentServer(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().(*net.TCPAddr).AddrPort()
	u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(a))
	if err != nil {
		_ = ln.Close()
		t.Skipf("udp port %d taken: %v", a.Port(), err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		_ = u.Close()
		<-done
	})
	return a
}

func TestSilentServerTimesOutAtTheContextDeadline(t *testing.T) {
	tests := []struct {
		name string
		run  func(ctx context.Context, a netip.AddrPort) error
	}{
		{"rtt", func(ctx context.Context, a netip.AddrPort) error {
			_, err := RTT(ctx, Host{}, a, 3, time.Millisecond)
			return err
		}},
		{"throughput", func(ctx context.Context, a netip.AddrPort) error {
			_, err := Throughput(ctx, Host{}, a, Download, 0, 50*time.Millisecond)
			return err
		}},
		{"loss", func(ctx context.Context, a netip.AddrPort) error {
			_, err := Loss(ctx, Host{}, a, 10, 100, 1000)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeaks(t)
			a := silentServer(t)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := tt.run(ctx, a)
			if took := time.Since(start); took > cancelBound {
				t.Errorf("returned %s after start, want soon after the deadline at 200 ms", took)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want context.DeadlineExceeded", err)
			}
		})
	}
}

func TestDirectionJSON(t *testing.T) {
	for _, d := range []Direction{Upload, Download} {
		b, err := json.Marshal(ThroughputResult{Direction: d})
		if err != nil {
			t.Fatal(err)
		}
		var got ThroughputResult
		if err := json.Unmarshal(b, &got); err != nil || got.Direction != d {
			t.Errorf("%s: round trip through %s gave %v, %v", d, b, got.Direction, err)
		}
	}
	if _, err := json.Marshal(ThroughputResult{}); err == nil {
		t.Error("marshalled the zero direction")
	}
}
