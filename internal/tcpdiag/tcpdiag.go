// Package tcpdiag reads the kernel's struct tcp_info of any TCP socket in
// a network namespace, not only of sockets this process owns.
//
// replab reads pages from a server across an emulated link and wants the
// sender's view of each transfer: the server's congestion window
// collapsing after a loss is what makes the next page slow, and the client
// can only read TCP_INFO of its own socket. The server's socket belongs to
// another process in another network namespace, so tcpdiag asks the
// kernel through NETLINK_SOCK_DIAG (inet_diag), as `ss -ti` does: one
// exact-match request per socket, answered with an inet_diag_msg whose
// INET_DIAG_INFO attribute carries struct tcp_info.
package tcpdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNotFound is wrapped by the error Info returns when the namespace
// holds no TCP socket with the given ends, or only one without tcp_info
// (a TIME_WAIT or SYN_RECV mini-socket).
var ErrNotFound = errors.New("no such TCP socket")

// queryTimeout bounds the wait for the kernel's answer (SO_RCVTIMEO), so
// a query never hangs; the kernel answers an exact lookup at once.
const queryTimeout = 5 * time.Second

// inet_diag wire layout (linux/inet_diag.h); x/sys/unix has the constants
// for netlink but not these structures.
const (
	sizeofSockID  = 48 // struct inet_diag_sockid
	sizeofReqV2   = 8 + sizeofSockID
	sizeofDiagMsg = 4 + sizeofSockID + 20 // struct inet_diag_msg

	inetDiagInfo = 2 // INET_DIAG_INFO: struct tcp_info
	tcpEstab     = 1 // TCP_ESTABLISHED
	noCookie     = 0xffffffff

	recvBufSize = 1 << 16
)

// Prober asks the kernel for TCP sockets' tcp_info in one network
// namespace: the one its netlink socket was created in. It is safe for
// concurrent use; queries are serialised.
type Prober struct {
	mu  sync.Mutex
	fd  int // -1 once closed
	seq uint32
	buf []byte
}

// Open creates the netlink socket inside the namespace to probe. do runs
// f in that namespace (replab passes lab.Site.Do); nil means this
// process's own namespace. A netlink socket stays bound to the namespace
// it was created in even after the creating thread leaves it, so only the
// creation has to happen there.
func Open(do func(f func() error) error) (*Prober, error) {
	fd := -1
	create := func() error {
		s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
		if err != nil {
			return fmt.Errorf("tcpdiag: netlink socket: %w", err)
		}
		fd = s
		return nil
	}
	var err error
	if do == nil {
		err = create()
	} else {
		err = do(create)
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("tcpdiag: open: %w", err)
	}
	if fd < 0 {
		return nil, errors.New("tcpdiag: open: namespace function did not run f")
	}
	tv := unix.NsecToTimeval(queryTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tcpdiag: open: set receive timeout: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tcpdiag: open: bind netlink socket: %w", err)
	}
	return &Prober{fd: fd, buf: make([]byte, recvBufSize)}, nil
}

// Close releases the netlink socket; Info fails afterwards. Closing twice
// is harmless.
func (p *Prober) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	if err != nil {
		return fmt.Errorf("tcpdiag: close: %w", err)
	}
	return nil
}

// Info returns the tcp_info of the socket whose local end is local and
// whose remote end is remote, as seen from the Prober's namespace (for the
// server's socket: local is the server's address and port, remote the
// client's). Both ends must be of one family; IPv4-mapped IPv6 addresses
// count as IPv4 and zones are ignored. The kernel's exact lookup does not
// filter by state: a socket still holding tcp_info after the connection
// started to close is returned too, with its state in TCPInfo.State. The
// error wraps ErrNotFound when no such socket exists.
func (p *Prober) Info(local, remote netip.AddrPort) (unix.TCPInfo, error) {
	var info unix.TCPInfo
	req, err := request(local, remote)
	if err != nil {
		return info, fmt.Errorf("tcpdiag: %v -> %v: %w", local, remote, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fd < 0 {
		return info, fmt.Errorf("tcpdiag: %v -> %v: %w", local, remote, net.ErrClosed)
	}
	p.seq++
	if err := p.query(req, p.seq, &info); err != nil {
		return info, fmt.Errorf("tcpdiag: %v -> %v: %w", local, remote, err)
	}
	return info, nil
}

// request encodes the netlink message body: an inet_diag_req_v2 naming
// one socket exactly.
func request(local, remote netip.AddrPort) ([]byte, error) {
	la, ra := local.Addr().Unmap(), remote.Addr().Unmap()
	var family uint8
	switch {
	case la.Is4() && ra.Is4():
		family = unix.AF_INET
	case la.Is6() && ra.Is6():
		family = unix.AF_INET6
	default:
		return nil, errors.New("local and remote address must be valid and of one family")
	}
	b := make([]byte, sizeofReqV2)
	b[0] = family
	b[1] = unix.IPPROTO_TCP
	b[2] = 1 << (inetDiagInfo - 1) // idiag_ext
	binary.NativeEndian.PutUint32(b[4:], 1<<tcpEstab)
	id := b[8:]
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	putAddr(id[4:20], la)
	putAddr(id[20:36], ra)
	// id[36:40] idiag_if stays 0: any interface.
	binary.NativeEndian.PutUint32(id[40:], noCookie)
	binary.NativeEndian.PutUint32(id[44:], noCookie)
	return b, nil
}

// putAddr stores a in the __be32[4] of inet_diag_sockid: network byte
// order, an IPv4 address in the first word.
func putAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(dst, v[:])
		return
	}
	v := a.As16()
	copy(dst, v[:])
}

// query sends one SOCK_DIAG_BY_FAMILY request and reads the replies
// carrying seq until the answer is complete; replies to earlier,
// abandoned queries are skipped. Called with p.mu held.
func (p *Prober) query(body []byte, seq uint32, info *unix.TCPInfo) error {
	msg := make([]byte, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	copy(msg[unix.NLMSG_HDRLEN:], body)
	if err := unix.Sendto(p.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}

	found := false
	for {
		n, from, err := unix.Recvfrom(p.fd, p.buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return fmt.Errorf("no netlink reply within %v", queryTimeout)
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("netlink receive: %w", err)
		}
		if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
			continue // not from the kernel
		}
		msgs, err := parseMessages(p.buf[:n])
		if err != nil {
			return fmt.Errorf("parse netlink reply: %w", err)
		}
		for _, m := range msgs {
			if m.seq != seq {
				continue
			}
			switch m.typ {
			case unix.NLMSG_DONE:
				return doneResult(found)
			case unix.NLMSG_ERROR:
				if len(m.data) < 4 {
					return errors.New("short netlink error message")
				}
				errno := -int32(binary.NativeEndian.Uint32(m.data))
				switch {
				case errno == 0: // an acknowledgement
					return doneResult(found)
				case unix.Errno(errno) == unix.ENOENT:
					return ErrNotFound
				default:
					return fmt.Errorf("inet_diag: %w", unix.Errno(errno))
				}
			case unix.SOCK_DIAG_BY_FAMILY:
				if !found {
					ok, err := decode(m.data, info)
					if err != nil {
						return err
					}
					found = ok
				}
			}
			if m.flags&unix.NLM_F_MULTI == 0 {
				// A single-part answer: the exact lookup's usual reply.
				return doneResult(found)
			}
		}
	}
}

// message is one netlink message of a datagram.
type message struct {
	typ, flags uint16
	seq        uint32
	data       []byte
}

// parseMessages splits a datagram into its netlink messages.
func parseMessages(b []byte) ([]message, error) {
	var msgs []message
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return nil, fmt.Errorf("bad netlink message length %d", l)
		}
		msgs = append(msgs, message{
			typ:   binary.NativeEndian.Uint16(b[4:]),
			flags: binary.NativeEndian.Uint16(b[6:]),
			seq:   binary.NativeEndian.Uint32(b[8:]),
			data:  b[unix.NLMSG_HDRLEN:l],
		})
		next := (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return msgs, nil
}

func doneResult(found bool) error {
	if !found {
		return ErrNotFound
	}
	return nil
}

// decode reads an inet_diag_msg and its attributes into info; it reports
// whether the message carried INET_DIAG_INFO.
func decode(b []byte, info *unix.TCPInfo) (bool, error) {
	if len(b) < sizeofDiagMsg {
		return false, fmt.Errorf("short inet_diag_msg: %d bytes", len(b))
	}
	attrs := b[sizeofDiagMsg:]
	for len(attrs) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(attrs[0:]))
		typ := binary.NativeEndian.Uint16(attrs[2:])
		if l < unix.SizeofRtAttr || l > len(attrs) {
			return false, fmt.Errorf("bad rtattr length %d", l)
		}
		if typ == inetDiagInfo {
			// Copy what both sides know: older kernels send a shorter
			// struct, newer ones a longer one.
			dst := unsafe.Slice((*byte)(unsafe.Pointer(info)), unsafe.Sizeof(*info))
			copy(dst, attrs[unix.SizeofRtAttr:l])
			return true, nil
		}
		next := (l + unix.RTA_ALIGNTO - 1) &^ (unix.RTA_ALIGNTO - 1)
		if next >= len(attrs) {
			break
		}
		attrs = attrs[next:]
	}
	return false, nil
}
