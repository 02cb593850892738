//go:build !linux

package netcheck

import (
	"errors"
	"net"
)

type tcpStats struct{ Retrans, RTTUs, MinRTTUs uint32 }

func readTCPStats(net.Conn) (tcpStats, error) {
	return tcpStats{}, errors.New("tcp info: only on Linux")
}
