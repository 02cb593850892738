package linkem

import (
	"testing"
	"time"
)

// fuzzTrace is shared by fuzz cases: the model must never modify a trace.
var fuzzTrace = &Trace{Name: "fuzz", Opportunity: []int64{0, 1, 1, 3, 7, 7, 7, 20}, PeriodMs: 20}

// fuzzParams maps fuzzer input to bounded Params: rates from 9600 bit/s to
// about 8.6 Gbit/s (or unlimited), delays up to 2 s, jitter up to 1 s.
func fuzzParams(seed int64, rateSel, delayUs, jitterUs, queue uint32, loss, flags uint16) Params {
	p := Params{
		Delay:      time.Duration(delayUs%2_000_000) * time.Microsecond,
		Jitter:     time.Duration(jitterUs%1_000_000) * time.Microsecond,
		JitterDist: allDists[flags&3],
		Reorder:    flags&4 != 0,
		Down:       flags&8 != 0,
		Loss:       float64(loss) / 65535 / 2,
		Seed:       seed,
	}
	if rateSel%5 != 0 {
		p.RateBps = 9600 + 2*int64(rateSel)
	}
	if flags&16 != 0 {
		p.GE = &GilbertElliott{P: float64(loss&0xff) / 255, R: float64(loss>>8) / 255, LossBad: 0.5, LossGood: 0.01}
	}
	if flags&32 != 0 {
		p.Trace = fuzzTrace
	}
	if flags&64 != 0 {
		p.MTU = 9000
	}
	if flags&128 != 0 {
		p.QueueBytes = int64(queue % (1 << 24))
	}
	return p
}

func FuzzOffer(f *testing.F) {
	f.Add(int64(1), uint32(12_000_000), uint32(10_000), uint32(0), uint32(0), uint16(0), uint16(0), []byte{0, 0, 37, 0, 0, 37, 1, 0, 37})
	f.Add(int64(2), uint32(1), uint32(50_000), uint32(5_000), uint32(3000), uint16(1000), uint16(1+4+16+128), []byte{10, 0, 200, 0, 0, 255, 5, 5, 5, 0, 0, 30})
	f.Add(int64(3), uint32(0), uint32(1), uint32(999_999), uint32(0), uint16(65535), uint16(2+32+64), []byte{0, 0, 250, 0, 0, 225, 255, 255, 255, 0, 0, 1})
	f.Add(int64(-4), uint32(4_294_967_295), uint32(0), uint32(3), uint32(1), uint16(7), uint16(3+8), []byte{1, 2, 3, 4, 5, 255, 7, 8, 9})
	f.Fuzz(func(t *testing.T, seed int64, rateSel, delayUs, jitterUs, queue uint32, loss, flags uint16, ops []byte) {
		p := fuzzParams(seed, rateSel, delayUs, jitterUs, queue, loss, flags)
		d := NewDirection(p)
		var now, last, scheduled, scheduledBytes int64
		for i := 0; i+2 < len(ops); i += 3 {
			now += int64(ops[i]) << (ops[i+1] % 32) // gaps from 0 to hours
			if ops[i+2] == 255 {
				// A runtime change: rate, up/down, trace on/off and seed,
				// keeping Reorder so that the ordering invariant holds.
				q := fuzzParams(seed+int64(ops[i]%2), uint32(ops[i])*uint32(ops[i+1])*40503, delayUs, jitterUs, queue, loss, flags^uint16(ops[i+1]&(8|16|32)))
				q.Reorder = p.Reorder
				d.SetParams(now, q)
				continue
			}
			size := int(ops[i+2]) * 40 // 0 .. 10160 bytes, some above any MTU
			at, v := d.Offer(now, size)
			switch v {
			case Deliver:
				if at < now {
					t.Fatalf("op %d: deliverAt %d before now %d", i/3, at, now)
				}
				if !p.Reorder && at < last {
					t.Fatalf("op %d: deliverAt %d before the previous %d without reorder", i/3, at, last)
				}
				last = max(last, at)
				scheduled++
				scheduledBytes += int64(size)
				if ops[i]%3 == 0 { // the plumbing reports some of them written
					d.Delivered(size)
				}
			case DropQueue, DropLoss, DropDown, DropMTU:
				if at != 0 {
					t.Fatalf("op %d: %v with deliverAt %d, want 0", i/3, v, at)
				}
			default:
				t.Fatalf("op %d: unknown verdict %d", i/3, v)
			}
			c := d.Counters()
			drops := c.DroppedQueuePackets + c.DroppedLossPackets + c.DroppedOtherPackets
			dropBytes := c.DroppedQueueBytes + c.DroppedLossBytes + c.DroppedOtherBytes
			if c.OfferedPackets != uint64(scheduled)+drops || c.OfferedBytes != uint64(scheduledBytes)+dropBytes {
				t.Fatalf("op %d: offered %d packets %d bytes, but scheduled %d/%d + dropped %d/%d",
					i/3, c.OfferedPackets, c.OfferedBytes, scheduled, scheduledBytes, drops, dropBytes)
			}
			if c.DeliveredPackets > uint64(scheduled) {
				t.Fatalf("op %d: %d delivered but only %d scheduled", i/3, c.DeliveredPackets, scheduled)
			}
			if c.QueueBytes < 0 || c.QueueBytes > c.QueueHighWaterBytes {
				t.Fatalf("op %d: QueueBytes %d, high water %d", i/3, c.QueueBytes, c.QueueHighWaterBytes)
			}
		}
		if fuzzTrace.PeriodMs != 20 || len(fuzzTrace.Opportunity) != 8 || fuzzTrace.Opportunity[3] != 3 {
			t.Fatalf("the trace was modified: %+v", fuzzTrace)
		}
	})
}
