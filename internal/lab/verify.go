package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sync/errgroup"

	"replab/internal/spec"
)

// verify proves every link that is up carries packets both ways: a UDP
// echo from one end to the other and back. Probes repeat until one
// answer arrives, so a lossy link passes too.
func (l *Lab) verify(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, lk := range l.Spec.Links {
		if lk.Forward.Down || lk.Reverse.Down {
			continue
		}
		g.Go(func() error { return l.echo(ctx, lk) })
	}
	return g.Wait()
}

func (l *Lab) echo(ctx context.Context, lk spec.Link) error {
	a, b := l.Site(lk.A), l.Site(lk.B)
	var srv *net.UDPConn
	if err := b.Do(func() (err error) {
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(b.Address, 0)))
		return err
	}); err != nil {
		return fmt.Errorf("verify link %s: listen in %s: %w", lk.Name(), lk.B, err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDP(buf[:n], from)
		}
	}()
	var cli *net.UDPConn
	if err := a.Do(func() (err error) {
		cli, err = net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		return fmt.Errorf("verify link %s: dial from %s: %w", lk.Name(), lk.A, err)
	}
	defer cli.Close()
	rtt := lk.Forward.Delay + lk.Reverse.Delay
	limit := 10*time.Second + 4*rtt
	deadline := time.Now().Add(limit)
	interval := max(100*time.Millisecond, rtt/2)
	buf := make([]byte, 64)
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := cli.Write([]byte("replab-verify")); err != nil {
			return fmt.Errorf("verify link %s: send: %w", lk.Name(), err)
		}
		_ = cli.SetReadDeadline(time.Now().Add(interval + rtt + 50*time.Millisecond))
		if _, err := cli.Read(buf); err == nil {
			return nil
		} else if ne := (net.Error)(nil); !errors.As(err, &ne) || !ne.Timeout() {
			return fmt.Errorf("verify link %s: receive: %w", lk.Name(), err)
		}
	}
	return fmt.Errorf("verify link %s: no packet made it %s->%s->%s within %s; the emulator or the site's routes are broken", lk.Name(), lk.A, lk.B, lk.A, limit)
}
