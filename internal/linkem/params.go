// Package linkem is the WAN link model: one direction of an emulated link
// (delay, jitter, rate, byte-limited queue, loss, trace-driven rate, up/down),
// pure and driven by a clock the caller passes in, so it is testable to the
// nanosecond without a kernel. The TUN plumbing lives in linkem/emu.
package linkem

import "time"

// DefaultMTU is the packet size limit of a direction when Params.MTU is 0.
const DefaultMTU = 1500

// JitterDist names the distribution jitter is drawn from.
type JitterDist string

const (
	JitterUniform      JitterDist = "uniform"      // uniform in [-jitter, +jitter]
	JitterNormal       JitterDist = "normal"       // normal, sigma = jitter
	JitterParetoNormal JitterDist = "paretonormal" // netem's pareto-normal mix, sigma = jitter
	JitterNone         JitterDist = ""             // treated as uniform when Jitter > 0
)

// GilbertElliott is netem's bursty loss model ("loss gemodel p r 1-h 1-k").
// All four are probabilities in [0,1].
type GilbertElliott struct {
	P        float64 `json:"p"`         // good -> bad transition probability per packet
	R        float64 `json:"r"`         // bad -> good transition probability per packet
	LossBad  float64 `json:"loss_bad"`  // 1-h: loss probability in the bad state
	LossGood float64 `json:"loss_good"` // 1-k: loss probability in the good state
}

// Trace is a Mahimahi packet-delivery trace: each entry is a millisecond
// offset at which the link may deliver one MTU-sized (1500-byte) packet. The
// trace repeats with period PeriodMs (its last timestamp).
type Trace struct {
	Name        string  `json:"name"`      // file name, for display
	Opportunity []int64 `json:"-"`         // sorted millisecond offsets
	PeriodMs    int64   `json:"period_ms"` // length of one repetition
}

// Params configures one direction of a link. The zero value is an ideal link:
// no delay, unlimited rate, no loss.
type Params struct {
	Delay      time.Duration   `json:"delay_ns"`  // one-way propagation delay
	Jitter     time.Duration   `json:"jitter_ns"` // jitter scale (see JitterDist)
	JitterDist JitterDist      `json:"jitter_dist,omitempty"`
	Reorder    bool            `json:"reorder"`           // let jitter reorder packets
	RateBps    int64           `json:"rate_bps"`          // bits per second; 0 = unlimited
	QueueBytes int64           `json:"queue_bytes"`       // drop-tail queue limit; 0 = one BDP (see DefaultQueueBytes)
	Loss       float64         `json:"loss"`              // independent random loss probability
	GE         *GilbertElliott `json:"gemodel,omitempty"` // bursty loss; applied in addition to Loss
	Trace      *Trace          `json:"trace,omitempty"`   // trace-driven rate; overrides RateBps
	Down       bool            `json:"down"`              // partitioned: every packet is dropped
	MTU        int             `json:"mtu"`               // largest packet accepted; 0 = DefaultMTU
	Seed       int64           `json:"seed"`              // seeds loss and jitter randomness
}

// Verdict is what the model decided for one offered packet.
type Verdict uint8

const (
	Deliver   Verdict = iota // deliver at the returned time
	DropQueue                // queue full (drop-tail)
	DropLoss                 // lost (random or Gilbert-Elliott)
	DropDown                 // link is down
	DropMTU                  // larger than the MTU
)

func (v Verdict) String() string {
	switch v {
	case Deliver:
		return "deliver"
	case DropQueue:
		return "drop-queue"
	case DropLoss:
		return "drop-loss"
	case DropDown:
		return "drop-down"
	case DropMTU:
		return "drop-mtu"
	}
	return "unknown"
}

// Counters are cumulative per-direction packet and byte counts.
type Counters struct {
	OfferedPackets      uint64 `json:"offered_packets"`
	OfferedBytes        uint64 `json:"offered_bytes"`
	DeliveredPackets    uint64 `json:"delivered_packets"`
	DeliveredBytes      uint64 `json:"delivered_bytes"`
	DroppedQueuePackets uint64 `json:"dropped_queue_packets"`
	DroppedQueueBytes   uint64 `json:"dropped_queue_bytes"`
	DroppedLossPackets  uint64 `json:"dropped_loss_packets"`
	DroppedLossBytes    uint64 `json:"dropped_loss_bytes"`
	DroppedOtherPackets uint64 `json:"dropped_other_packets"` // link down or over MTU
	DroppedOtherBytes   uint64 `json:"dropped_other_bytes"`
	QueueBytes          int64  `json:"queue_bytes"`            // backlog waiting for serialization at the last offer
	QueueHighWaterBytes int64  `json:"queue_high_water_bytes"` // largest backlog seen
	// ClassBytes are the delivered bytes by traffic class (index: Class),
	// as the plumbing's classifier said; all ClassOther without one.
	ClassBytes [NumClasses]uint64 `json:"class_bytes"`
}
