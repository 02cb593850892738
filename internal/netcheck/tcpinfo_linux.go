package netcheck

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// tcpStats is what netcheck takes from TCP_INFO of a sending socket.
type tcpStats struct {
	Retrans  uint32 // tcpi_total_retrans
	RTTUs    uint32 // tcpi_rtt (smoothed), microseconds
	MinRTTUs uint32 // tcpi_min_rtt, microseconds
}

// readTCPStats reads TCP_INFO of c, which must be an open *net.TCPConn.
func readTCPStats(c net.Conn) (tcpStats, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return tcpStats{}, fmt.Errorf("tcp info: %T is not a TCP connection", c)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return tcpStats{}, fmt.Errorf("tcp info: %w", err)
	}
	var info *unix.TCPInfo
	var ierr error
	if err := raw.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil {
		return tcpStats{}, fmt.Errorf("tcp info: %w", err)
	}
	if ierr != nil {
		return tcpStats{}, fmt.Errorf("tcp info: getsockopt TCP_INFO: %w", ierr)
	}
	return tcpStats{Retrans: info.Total_retrans, RTTUs: info.Rtt, MinRTTUs: info.Min_rtt}, nil
}
