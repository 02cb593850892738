package linkem

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// tcpPacket builds an IP packet (IPv4 or IPv6 by the addresses) with a
// TCP header and payload bytes.
func tcpPacket(src, dst netip.AddrPort, tos byte, payload int) []byte {
	var p []byte
	if src.Addr().Is4() {
		p = make([]byte, 20+20+payload)
		p[0], p[1], p[8], p[9] = 0x45, tos, 64, 6
		binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
		s, d := src.Addr().As4(), dst.Addr().As4()
		copy(p[12:], s[:])
		copy(p[16:], d[:])
		p = p[:20+20+payload]
		binary.BigEndian.PutUint16(p[20:], src.Port())
		binary.BigEndian.PutUint16(p[22:], dst.Port())
		p[32] = 5 << 4
		return p
	}
	p = make([]byte, 40+20+payload)
	binary.BigEndian.PutUint32(p[0:], 6<<28|uint32(tos)<<20)
	binary.BigEndian.PutUint16(p[4:], uint16(20+payload))
	p[6], p[7] = 6, 64
	s, d := src.Addr().As16(), dst.Addr().As16()
	copy(p[8:], s[:])
	copy(p[24:], d[:])
	binary.BigEndian.PutUint16(p[40:], src.Port())
	binary.BigEndian.PutUint16(p[42:], dst.Port())
	p[52] = 5 << 4
	return p
}

func TestClassify(t *testing.T) {
	ap := netip.MustParseAddrPort
	a := netip.MustParseAddr
	// Sites: primary .1 (node p1:5432), standby .2 (node s1:5432, and
	// clients), client .3 (clients alone), nas .4 (storage on 10809),
	// elsewhere .9; and the same in IPv6.
	c := NewClassifier(ClassTable{
		Servers:     []netip.AddrPort{ap("198.18.0.1:5432"), ap("198.18.0.2:5432"), ap("[fd00::1]:5432"), ap("[fd00::2]:5432")},
		Storage:     []netip.AddrPort{ap("198.18.0.4:10809"), ap("[fd00::4]:10809")},
		NodeAddrs:   []netip.Addr{a("198.18.0.1"), a("198.18.0.2"), a("fd00::1"), a("fd00::2")},
		ClientAddrs: []netip.Addr{a("198.18.0.2"), a("198.18.0.3"), a("fd00::3")},
	})
	tests := []struct {
		name     string
		src, dst string
		tos      byte
		want     Class
	}{
		{"a standby's stream to its primary's server port is replication", "198.18.0.2:40001", "198.18.0.1:5432", 0, ClassReplication},
		{"the primary's answer on it is replication", "198.18.0.1:5432", "198.18.0.2:40001", 0, ClassReplication},
		{"a client site's connection to a node is client", "198.18.0.3:50000", "198.18.0.1:5432", 0, ClassClient},
		{"the node's answer to it is client", "198.18.0.1:5432", "198.18.0.3:50000", 0, ClassClient},
		{"a marked connection from a site with a node is client", "198.18.0.2:40002", "198.18.0.1:5432", ClientTOS, ClassClient},
		{"its answer, with the mark reflected, is client", "198.18.0.1:5432", "198.18.0.2:40002", ClientTOS, ClassClient},
		{"ECN bits do not hide the mark", "198.18.0.2:40002", "198.18.0.1:5432", ClientTOS | 2, ClassClient},
		{"a node's storage traffic is storage", "198.18.0.1:33000", "198.18.0.4:10809", 0, ClassStorage},
		{"the storage's answer is storage", "198.18.0.4:10809", "198.18.0.1:33000", 0, ClassStorage},
		{"node sites on other ports (group communication) are replication", "198.18.0.1:4567", "198.18.0.2:39000", 0, ClassReplication},
		{"a node's server port from an unknown site is other", "198.18.0.9:50000", "198.18.0.1:5432", 0, ClassOther},
		{"unknown sites are other", "198.18.0.9:1", "198.18.0.3:2", 0, ClassOther},
		{"IPv6 replication", "[fd00::2]:40001", "[fd00::1]:5432", 0, ClassReplication},
		{"IPv6 client", "[fd00::3]:50000", "[fd00::2]:5432", 0, ClassClient},
		{"IPv6 marked client", "[fd00::2]:40001", "[fd00::1]:5432", ClientTOS, ClassClient},
		{"IPv6 storage", "[fd00::4]:10809", "[fd00::1]:40000", 0, ClassStorage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pkt := tcpPacket(ap(tt.src), ap(tt.dst), tt.tos, 100)
			if got := c.Classify(pkt); got != tt.want {
				t.Errorf("Classify(%s -> %s, tos %#x) = %v; want %v", tt.src, tt.dst, tt.tos, got, tt.want)
			}
		})
	}
}

func TestClassifyMalformedAndNil(t *testing.T) {
	var none *Classifier
	pkt := tcpPacket(netip.MustParseAddrPort("198.18.0.2:1"), netip.MustParseAddrPort("198.18.0.1:5432"), 0, 0)
	if got := none.Classify(pkt); got != ClassOther {
		t.Errorf("nil classifier: %v; want other", got)
	}
	c := NewClassifier(ClassTable{Servers: []netip.AddrPort{netip.MustParseAddrPort("198.18.0.1:5432")},
		NodeAddrs: []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")}})
	for _, n := range []int{0, 1, 19, 20, 23} {
		_ = c.Classify(pkt[:n]) // must not panic
	}
	frag := append([]byte(nil), pkt...)
	binary.BigEndian.PutUint16(frag[6:], 185) // a later fragment: no ports
	if got := c.Classify(frag); got != ClassReplication {
		t.Errorf("later fragment between node sites: %v; want replication (by addresses)", got)
	}
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	c := NewClassifier(ClassTable{Servers: []netip.AddrPort{netip.MustParseAddrPort("198.18.0.1:5432")},
		NodeAddrs: []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")}})
	pkt := tcpPacket(netip.MustParseAddrPort("198.18.0.2:40000"), netip.MustParseAddrPort("198.18.0.1:5432"), 0, 100)
	if n := testing.AllocsPerRun(100, func() { _ = c.Classify(pkt) }); n != 0 {
		t.Errorf("Classify allocates %v times per call", n)
	}
}
