package lab

import (
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"

	"replab/internal/linkem"
)

// SetTrafficClasses tells the emulator how to count delivered bytes by
// traffic class (linkem.Classifier, the links' bytes_by_class): servers
// are the nodes' server ports, nodeSites the sites that hold nodes,
// clientSites the sites users run in. The storage services' ports are
// the lab's own. No-op for a lab without links.
func (l *Lab) SetTrafficClasses(servers []netip.AddrPort, nodeSites, clientSites []string) {
	if l.emu == nil {
		return
	}
	t := linkem.ClassTable{Servers: servers}
	addrs := func(sites []string) []netip.Addr {
		var out []netip.Addr
		for _, n := range sites {
			if s := l.Site(n); s != nil {
				out = append(out, s.Address)
			}
		}
		return out
	}
	t.NodeAddrs, t.ClientAddrs = addrs(nodeSites), addrs(clientSites)
	l.nodesMu.Lock()
	t.Storage = append(t.Storage, l.storeEPs...)
	l.nodesMu.Unlock()
	l.emu.SetClassifier(linkem.NewClassifier(t))
}

// markClient sets linkem.ClientTOS on a socket the lab dials (a
// net.Dialer's Control). Errors are ignored: an unmarked connection is
// classified by its addresses alone.
func markClient(network, _ string, c syscall.RawConn) error {
	_ = c.Control(func(fd uintptr) {
		switch network {
		case "tcp4", "udp4":
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, linkem.ClientTOS)
		case "tcp6", "udp6":
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, linkem.ClientTOS)
		}
	})
	return nil
}
