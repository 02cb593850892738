package linkem

import (
	"encoding/binary"
	"net/netip"
)

// Class is a packet's traffic class, for bytes by class per direction
// (Counters.ClassBytes): on a link shared by clients and replication,
// the replication traffic alone.
type Class uint8

const (
	ClassOther       Class = iota // none of the below
	ClassReplication              // between two node sites (streams, group communication, an HA manager's store)
	ClassClient                   // between a client (a user, the lag probe, a monitor) and a node's server port
	ClassStorage                  // to or from a storage service (nbdkit, sftp-server)
	NumClasses
)

func (c Class) String() string {
	switch c {
	case ClassReplication:
		return "replication"
	case ClassClient:
		return "client"
	case ClassStorage:
		return "storage"
	}
	return "other"
}

// ClientTOS is the IPv4 TOS (IPv6 traffic class) byte of connections
// replab itself opens in a site (DSCP CS1, ECN bits clear): the lab marks
// them, and with net.ipv4.tcp_reflect_tos the accepting side's replies
// carry the same byte, so both directions of a client connection are told
// apart from a replica's connection between the same two sites.
const ClientTOS = 0x20

// ClassTable is what the lab knows about its addresses and ports.
type ClassTable struct {
	// Servers are the nodes' server ports: where clients and replicas
	// connect.
	Servers []netip.AddrPort
	// Storage are the storage services' ports.
	Storage []netip.AddrPort
	// NodeAddrs are the addresses of the sites that hold nodes.
	NodeAddrs []netip.Addr
	// ClientAddrs are the addresses of the sites clients run in.
	ClientAddrs []netip.Addr
}

// Classifier classifies packets by a ClassTable. It is built once and
// only read afterwards, so it is safe for concurrent use; Classify does
// not allocate.
type Classifier struct {
	servers, storage []endpoint
	addrs            []addrFlags
}

type endpoint struct {
	a    [16]byte
	port uint16
}

type addrFlags struct {
	a            [16]byte
	node, client bool
}

// NewClassifier builds a classifier from t.
func NewClassifier(t ClassTable) *Classifier {
	c := &Classifier{}
	for _, ap := range t.Servers {
		c.servers = append(c.servers, endpoint{ap.Addr().Unmap().As16(), ap.Port()})
	}
	for _, ap := range t.Storage {
		c.storage = append(c.storage, endpoint{ap.Addr().Unmap().As16(), ap.Port()})
	}
	set := func(a netip.Addr, node bool) {
		k := a.Unmap().As16()
		for i := range c.addrs {
			if c.addrs[i].a == k {
				c.addrs[i].node = c.addrs[i].node || node
				c.addrs[i].client = c.addrs[i].client || !node
				return
			}
		}
		c.addrs = append(c.addrs, addrFlags{a: k, node: node, client: !node})
	}
	for _, a := range t.NodeAddrs {
		set(a, true)
	}
	for _, a := range t.ClientAddrs {
		set(a, false)
	}
	return c
}

// Classify returns the class of an IPv4 or IPv6 packet (its IP header
// first). In order: either end a storage service → storage; marked with
// ClientTOS → client; either end a node's server port → replication when
// the other end is a node site, client when it is a site of clients
// alone; both ends node sites → replication; else other. A nil
// classifier, or a packet it cannot parse, is other.
func (c *Classifier) Classify(pkt []byte) Class {
	if c == nil {
		return ClassOther
	}
	var src, dst [16]byte
	var sport, dport uint16
	var tos byte
	switch {
	case len(pkt) >= 20 && pkt[0]>>4 == 4:
		ihl := int(pkt[0]&0x0f) * 4
		if ihl < 20 || len(pkt) < ihl {
			return ClassOther
		}
		tos = pkt[1]
		// IPv4-mapped, as netip.Addr.As16 gives for an IPv4 address.
		src[10], src[11], dst[10], dst[11] = 0xff, 0xff, 0xff, 0xff
		copy(src[12:], pkt[12:16])
		copy(dst[12:], pkt[16:20])
		firstFragment := binary.BigEndian.Uint16(pkt[6:8])&0x1fff == 0
		if firstFragment && hasPorts(pkt[9]) && len(pkt) >= ihl+4 {
			sport = binary.BigEndian.Uint16(pkt[ihl:])
			dport = binary.BigEndian.Uint16(pkt[ihl+2:])
		}
	case len(pkt) >= 40 && pkt[0]>>4 == 6:
		tos = byte(binary.BigEndian.Uint16(pkt[0:2]) >> 4)
		copy(src[:], pkt[8:24])
		copy(dst[:], pkt[24:40])
		// Ports only right after the fixed header (no extension headers).
		if hasPorts(pkt[6]) && len(pkt) >= 44 {
			sport = binary.BigEndian.Uint16(pkt[40:])
			dport = binary.BigEndian.Uint16(pkt[42:])
		}
	default:
		return ClassOther
	}
	if sport != 0 && (has(c.storage, src, sport) || has(c.storage, dst, dport)) {
		return ClassStorage
	}
	if tos&^3 == ClientTOS {
		return ClassClient
	}
	srcNode, srcClient := c.flags(src)
	dstNode, dstClient := c.flags(dst)
	if sport != 0 {
		switch {
		case has(c.servers, dst, dport):
			return serverPeer(srcNode, srcClient)
		case has(c.servers, src, sport):
			return serverPeer(dstNode, dstClient)
		}
	}
	if srcNode && dstNode {
		return ClassReplication
	}
	return ClassOther
}

// serverPeer classifies a packet to or from a node's server port by its
// other end: a site that holds nodes is a replica's (a client there
// connects through the lab and is marked), a site of clients alone a
// client's.
func serverPeer(node, client bool) Class {
	switch {
	case node:
		return ClassReplication
	case client:
		return ClassClient
	}
	return ClassOther
}

func (c *Classifier) flags(a [16]byte) (node, client bool) {
	for i := range c.addrs {
		if c.addrs[i].a == a {
			return c.addrs[i].node, c.addrs[i].client
		}
	}
	return false, false
}

func has(eps []endpoint, a [16]byte, port uint16) bool {
	for i := range eps {
		if eps[i].port == port && eps[i].a == a {
			return true
		}
	}
	return false
}

// hasPorts says whether an IP protocol number starts with 16-bit source
// and destination ports: TCP, UDP, UDP-Lite, SCTP, DCCP.
func hasPorts(proto byte) bool {
	switch proto {
	case 6, 17, 136, 132, 33:
		return true
	}
	return false
}
