package lab

import (
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"replab/internal/testkit"
)

// tcpInfo reads a connection's TCP_INFO.
func tcpInfo(t *testing.T, c net.Conn) *unix.TCPInfo {
	t.Helper()
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || ierr != nil {
		t.Fatalf("TCP_INFO: %v %v", err, ierr)
	}
	return info
}

// A site's era TCP is on its routes (initcwnd, rto_min: ip route in its
// namespace) and in its sysctls, and the connections it makes have it:
// the initial window, no SACK, timestamps or window scaling negotiated,
// a retransmission timeout no shorter than rto_min.
func TestEraTCPOnRoutesAndSysctls(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab)
	s := specFrom(t, "era", `
[lab]
name = "NAME"
[site.old]
tcp = "1999"
[site.new]
tcp_initcwnd = 4
tcp_rto_min = "300ms"
[[link]]
sites = ["old", "new"]
delay = "1ms"
`)
	l := up(t, s)
	old, nw := l.Site("old"), l.Site("new")

	for _, tc := range []struct {
		site, peer *Site
		want       []string
	}{
		{old, nw, []string{"initcwnd 2", "rto_min lock 1s"}},
		{nw, old, []string{"initcwnd 4", "rto_min lock 300ms"}},
	} {
		out, err := exec.Command("ip", "-n", tc.site.Netns, "route", "show", tc.peer.Address.String()).CombinedOutput()
		if err != nil {
			t.Fatalf("ip route in %s: %v: %s", tc.site.Name, err, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("site %s's route %q lacks %q", tc.site.Name, strings.TrimSpace(string(out)), w)
			}
		}
	}
	for key, want := range map[string]string{"tcp_sack": "0", "tcp_timestamps": "0", "tcp_window_scaling": "0", "tcp_early_retrans": "0",
		"tcp_recovery": "0", "tcp_frto": "0", "tcp_slow_start_after_idle": "1", "tcp_congestion_control": "reno"} {
		if got := inSite(t, old, "/proc/sys/net/ipv4/"+key); got != want {
			t.Errorf("site old: %s = %q, want %q", key, got, want)
		}
	}
	if got := inSite(t, nw, "/proc/sys/net/ipv4/tcp_sack"); got != "1" {
		t.Errorf("site new: tcp_sack = %q, want the kernel's 1", got)
	}

	// A connection from old to new.
	var ln net.Listener
	if err := nw.Do(func() (err error) { ln, err = net.Listen("tcp", nw.Address.String()+":0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := old.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	srv, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer srv.Close()
	if ci, si := tcpInfo(t, cli), tcpInfo(t, srv); ci.Snd_cwnd != 2 || si.Snd_cwnd != 4 {
		t.Errorf("initial congestion windows: old's %d, new's %d segments; want 2 and 4", ci.Snd_cwnd, si.Snd_cwnd)
	}
	// A few round trips each way give both ends an RTT, hence an RTO.
	buf := make([]byte, 100)
	for i := 0; i < 5; i++ {
		if _, err := cli.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(srv, buf); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Write(buf); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(cli, buf); err != nil {
			t.Fatal(err)
		}
	}
	ci, si := tcpInfo(t, cli), tcpInfo(t, srv)
	const sack, ts, wscale = 0x2, 0x1, 0x4 // TCPI_OPT_*
	if ci.Options&(sack|ts|wscale) != 0 {
		t.Errorf("old's connection negotiated options %#x: want no SACK, timestamps or window scaling (a 1999 stack offers none)", ci.Options)
	}
	if ci.Rto < 1_000_000 || si.Rto < 300_000 || si.Rto >= 1_000_000 {
		t.Errorf("RTO %d µs at old (rto_min 1s), %d µs at new (rto_min 300ms)", ci.Rto, si.Rto)
	}
}
