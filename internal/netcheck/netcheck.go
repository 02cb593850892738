// Package netcheck measures what a link really does: UDP round-trip time,
// TCP goodput in either direction, and one-way UDP loss with its bursts,
// between a client in one network namespace and a Server in another. Pure Go
// over real sockets; no external tools.
package netcheck

import (
	"fmt"
	"time"
)

// Netns runs f on a goroutine locked to an OS thread that is inside a network
// namespace. Sockets created inside f belong to that namespace and keep
// working after f returns.
type Netns interface{ Do(f func() error) error }

// Host is a Netns for the current namespace (used by tests on loopback).
type Host struct{}

// Do runs f on the calling goroutine.
func (Host) Do(f func() error) error { return f() }

// Direction is which way a throughput measurement sends its bulk stream.
type Direction uint8

const (
	Upload   Direction = 1 // from the client's namespace to the server
	Download Direction = 2 // from the server to the client's namespace
)

func (d Direction) String() string {
	switch d {
	case Upload:
		return "upload"
	case Download:
		return "download"
	}
	return fmt.Sprintf("direction(%d)", uint8(d))
}

// MarshalText writes "upload" or "download".
func (d Direction) MarshalText() ([]byte, error) {
	if d != Upload && d != Download {
		return nil, fmt.Errorf("bad direction %d", uint8(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads "upload" or "download".
func (d *Direction) UnmarshalText(b []byte) error {
	switch string(b) {
	case "upload":
		*d = Upload
	case "download":
		*d = Download
	default:
		return fmt.Errorf("direction %q: want upload or download", b)
	}
	return nil
}

// RTTResult is the outcome of RTT. Sent and Received count probes; the
// statistics are over received probes only (all zero when none came back).
type RTTResult struct {
	Sent      int       `json:"sent"`
	Received  int       `json:"received"`
	MinMs     float64   `json:"min_ms"`
	MeanMs    float64   `json:"mean_ms"`
	P50Ms     float64   `json:"p50_ms"`
	P99Ms     float64   `json:"p99_ms"`
	MaxMs     float64   `json:"max_ms"`
	SamplesMs []float64 `json:"samples_ms,omitempty"` // received probes, in sending order
}

// ThroughputResult is the outcome of Throughput. Bytes and Seconds are what
// the receiver saw inside the measured window (warmup excluded). The kernel
// figures come from TCP_INFO of the sending socket, read when the window
// ended; Retransmits covers the whole connection, warmup included.
type ThroughputResult struct {
	Direction      Direction `json:"direction"`
	Bytes          int64     `json:"bytes"`
	Seconds        float64   `json:"seconds"`
	GoodputBps     float64   `json:"goodput_bps"`       // bits per second
	Retransmits    uint32    `json:"retransmits"`       // tcpi_total_retrans, segments
	KernelRTTMs    float64   `json:"kernel_rtt_ms"`     // smoothed RTT (tcpi_rtt), queueing included
	KernelMinRTTMs float64   `json:"kernel_min_rtt_ms"` // tcpi_min_rtt
}

// LossResult is the outcome of Loss. A burst is a run of consecutive lost
// sequence numbers.
type LossResult struct {
	Sent             int     `json:"sent"`
	Received         int     `json:"received"`
	LossFraction     float64 `json:"loss_fraction"`
	Bursts           int     `json:"bursts"`
	MaxBurstPackets  int     `json:"max_burst_packets"`
	MeanBurstPackets float64 `json:"mean_burst_packets"` // 0 when nothing was lost
	// SendSeconds is how long sending took; longer than n/pps when the
	// sending host could not keep up (e.g. a full socket buffer blocked it).
	SendSeconds float64 `json:"send_seconds"`
}

// Bounds on every wait. A measurement may take its own length plus
// sessionSlack at most; setting up a session may take setupTimeout at most.
const (
	setupTimeout = 10 * time.Second
	sessionSlack = 30 * time.Second
	maxWindow    = time.Hour // longest warmup+duration of one throughput measurement
)
