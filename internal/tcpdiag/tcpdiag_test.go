package tcpdiag

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"replab/internal/lab"
	"replab/internal/testkit"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const payload = 4 << 20

// pair is one TCP connection made in some namespace: srv is the
// accepted (server) side, cli the dialled one.
type pair struct {
	srv, cli *net.TCPConn
}

func addrPort(t *testing.T, a net.Addr) netip.AddrPort {
	t.Helper()
	return a.(*net.TCPAddr).AddrPort()
}

// connect listens on host:0, dials it and accepts. It runs wherever it is
// called, so inside a namespace function the sockets are made there.
func connect(network, host string) (pair, error) {
	ln, err := net.Listen(network, net.JoinHostPort(host, "0"))
	if err != nil {
		return pair{}, err
	}
	defer ln.Close()
	cli, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		return pair{}, err
	}
	srv, err := ln.Accept()
	if err != nil {
		cli.Close()
		return pair{}, err
	}
	return pair{srv: srv.(*net.TCPConn), cli: cli.(*net.TCPConn)}, nil
}

// transfer sends payload bytes from server to client, then one byte back:
// when the server has read it, the ACK covering all the data (carried by
// that segment) has been processed, so the sender's counters are final.
func transfer(t *testing.T, p pair) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		_, err := p.srv.Write(make([]byte, payload))
		errc <- err
	}()
	if _, err := io.ReadFull(p.cli, make([]byte, payload)); err != nil {
		t.Fatalf("client read: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server write: %v", err)
	}
	if _, err := p.cli.Write([]byte{1}); err != nil {
		t.Fatalf("client write: %v", err)
	}
	if _, err := io.ReadFull(p.srv, make([]byte, 1)); err != nil {
		t.Fatalf("server read: %v", err)
	}
}

// ownInfo reads TCP_INFO of a socket this process owns.
func ownInfo(t *testing.T, c *net.TCPConn) *unix.TCPInfo {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatalf("getsockopt TCP_INFO: %v", gerr)
	}
	return info
}

func openProber(t *testing.T, do func(func() error) error) *Prober {
	t.Helper()
	p, err := Open(do)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// checkSender compares the sender's tcp_info seen through sock_diag with
// what its own getsockopt reports right after.
func checkSender(t *testing.T, p *Prober, c pair) {
	t.Helper()
	local, remote := addrPort(t, c.srv.LocalAddr()), addrPort(t, c.srv.RemoteAddr())
	diag, err := p.Info(local, remote)
	if err != nil {
		t.Fatalf("Info(server side): %v", err)
	}
	own := ownInfo(t, c.srv)
	if diag.State != tcpEstab {
		t.Errorf("State = %d, want ESTABLISHED (%d)", diag.State, tcpEstab)
	}
	if diag.Snd_mss == 0 || diag.Snd_cwnd == 0 || diag.Rtt == 0 {
		t.Errorf("Snd_mss %d, Snd_cwnd %d, Rtt %d: want all non-zero", diag.Snd_mss, diag.Snd_cwnd, diag.Rtt)
	}
	if diag.Snd_mss != own.Snd_mss {
		t.Errorf("Snd_mss: diag %d, getsockopt %d", diag.Snd_mss, own.Snd_mss)
	}
	if diag.Bytes_acked < payload || own.Bytes_acked < payload {
		t.Errorf("Bytes_acked: diag %d, getsockopt %d, want both >= %d", diag.Bytes_acked, own.Bytes_acked, payload)
	}
	if diag.Bytes_acked != own.Bytes_acked {
		t.Errorf("Bytes_acked: diag %d, getsockopt %d, want equal (no data moves in between)", diag.Bytes_acked, own.Bytes_acked)
	}
	if diag.Segs_out == 0 || diag.Segs_out > own.Segs_out {
		t.Errorf("Segs_out: diag %d, getsockopt after it %d", diag.Segs_out, own.Segs_out)
	}
}

func checkReceiver(t *testing.T, p *Prober, c pair) {
	t.Helper()
	info, err := p.Info(addrPort(t, c.cli.LocalAddr()), addrPort(t, c.cli.RemoteAddr()))
	if err != nil {
		t.Fatalf("Info(client side): %v", err)
	}
	if info.Bytes_received < payload {
		t.Errorf("client Bytes_received %d, want >= %d", info.Bytes_received, payload)
	}
	if info.Bytes_acked == 0 {
		t.Errorf("client Bytes_acked 0, want its 1-byte reply acknowledged")
	}
}

func TestInfoOwnNamespace(t *testing.T) {
	for _, tc := range []struct{ network, host string }{
		{"tcp4", "127.0.0.1"},
		{"tcp6", "::1"},
	} {
		t.Run(tc.network, func(t *testing.T) {
			c, err := connect(tc.network, tc.host)
			if err != nil {
				if tc.network == "tcp6" {
					t.Skipf("no IPv6 loopback: %v", err)
				}
				t.Fatal(err)
			}
			defer c.srv.Close()
			defer c.cli.Close()
			transfer(t, c)

			p := openProber(t, nil)
			checkSender(t, p, c)
			checkReceiver(t, p, c)

			// The same socket named with IPv4-mapped addresses is found too.
			if tc.network == "tcp4" {
				l, r := addrPort(t, c.srv.LocalAddr()), addrPort(t, c.srv.RemoteAddr())
				mapped := func(a netip.AddrPort) netip.AddrPort {
					return netip.AddrPortFrom(netip.AddrFrom16(a.Addr().As16()), a.Port())
				}
				if _, err := p.Info(mapped(l), mapped(r)); err != nil {
					t.Errorf("Info with IPv4-mapped addresses: %v", err)
				}
			}
		})
	}
}

func TestInfoErrors(t *testing.T) {
	c, err := connect("tcp4", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.srv.Close()
	defer c.cli.Close()
	local, remote := addrPort(t, c.srv.LocalAddr()), addrPort(t, c.srv.RemoteAddr())
	p, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}

	// A remote port nothing is connected to names no socket.
	if _, err := p.Info(remote, netip.AddrPortFrom(local.Addr(), 1)); !errors.Is(err, ErrNotFound) {
		t.Errorf("Info(no such socket) = %v, want ErrNotFound", err)
	}
	if _, err := p.Info(netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Info(127.0.0.1:1 -> :2) = %v, want ErrNotFound", err)
	}
	if _, err := p.Info(local, netip.MustParseAddrPort("[::1]:80")); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Info(mixed families) = %v, want a family error", err)
	}
	if _, err := p.Info(netip.AddrPort{}, remote); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("Info(invalid address) = %v, want an error", err)
	}
	// The prober still works after those.
	if _, err := p.Info(local, remote); err != nil {
		t.Fatalf("Info after errors: %v", err)
	}

	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := p.Info(local, remote); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Info after Close = %v, want net.ErrClosed", err)
	}

	// A namespace function that fails, or never runs f, fails Open.
	boom := errors.New("boom")
	if _, err := Open(func(func() error) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Open(failing do) = %v, want boom", err)
	}
	if _, err := Open(func(func() error) error { return nil }); err == nil {
		t.Errorf("Open(do that skips f) succeeded")
	}
}

func TestInfoConcurrent(t *testing.T) {
	c, err := connect("tcp4", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer c.srv.Close()
	defer c.cli.Close()
	local, remote := addrPort(t, c.srv.LocalAddr()), addrPort(t, c.srv.RemoteAddr())
	p := openProber(t, nil)
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := p.Info(local, remote); err != nil {
					errc <- err
					return
				}
				if _, err := p.Info(local, netip.AddrPortFrom(remote.Addr(), 1)); !errors.Is(err, ErrNotFound) {
					errc <- fmt.Errorf("missing socket: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

func TestInfoOtherNamespace(t *testing.T) {
	testkit.Need(t, testkit.Lab)
	ns := fmt.Sprintf("tdiag-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", ns, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s link set lo up: %v: %s", ns, err, out)
	}

	var c pair
	if err := lab.InNetns(ns, func() error {
		var err error
		c, err = connect("tcp4", "127.0.0.1")
		return err
	}); err != nil {
		t.Fatalf("connect in %s: %v", ns, err)
	}
	defer c.srv.Close()
	defer c.cli.Close()
	transfer(t, c)

	do := func(f func() error) error { return lab.InNetns(ns, f) }
	inside := openProber(t, do)
	checkSender(t, inside, c)
	checkReceiver(t, inside, c)

	outside := openProber(t, nil)
	local, remote := addrPort(t, c.srv.LocalAddr()), addrPort(t, c.srv.RemoteAddr())
	if _, err := outside.Info(local, remote); !errors.Is(err, ErrNotFound) {
		t.Errorf("Info from the root namespace = %v, want ErrNotFound", err)
	}
	// The namespaced prober still answers from its namespace although the
	// thread that created it has long left.
	if _, err := inside.Info(local, remote); err != nil {
		t.Errorf("Info(inside) again: %v", err)
	}
}

// TestInfoTimeWait: once the connection is closed, the side that closed
// first lingers in TIME_WAIT, a mini-socket without tcp_info: not found.
func TestInfoTimeWait(t *testing.T) {
	c, err := connect("tcp4", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	local, remote := addrPort(t, c.cli.LocalAddr()), addrPort(t, c.cli.RemoteAddr())
	p := openProber(t, nil)
	if _, err := p.Info(local, remote); err != nil {
		t.Fatalf("Info before close: %v", err)
	}
	c.cli.Close()
	if _, err := io.ReadAll(c.srv); err != nil { // the client's FIN
		t.Fatalf("server read: %v", err)
	}
	c.srv.Close()
	// The final ACK is processed asynchronously: wait for it, boundedly.
	for i := 0; ; i++ {
		_, err := p.Info(local, remote)
		if errors.Is(err, ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatalf("Info after close: %v", err)
		}
		if i == 500 {
			t.Fatal("client socket still has tcp_info after 500 polls")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
