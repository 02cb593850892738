package linkem

import (
	"testing"
	"time"
)

func TestQueueDropTail(t *testing.T) {
	// 12 Mbit/s: a 1500-byte packet occupies the queue for exactly 1 ms.
	p := Params{RateBps: 12_000_000, QueueBytes: 4500}
	t.Run("the queue drops exactly when the byte limit would be exceeded", func(t *testing.T) {
		d := runScript(t, p, []step{
			offer(0, 1500, 1*ms), offer(0, 1500, 2*ms), offer(0, 1500, 3*ms), // 4500 bytes: exactly full
			dropped(0, 1, DropQueue), // one more byte is too many
			dropped(ms-1, 1500, DropQueue),
			offer(ms, 1500, 4*ms), // the first packet has left at 1 ms: room again
			dropped(ms, 1500, DropQueue),
			offer(2*ms, 1000, 4*ms+666_667), offer(2*ms, 500, 5*ms),
		})
		c := d.Counters()
		if c.QueueBytes != 4500 || c.QueueHighWaterBytes != 4500 {
			t.Errorf("QueueBytes = %d, QueueHighWaterBytes = %d; want 4500, 4500", c.QueueBytes, c.QueueHighWaterBytes)
		}
		if c.DroppedQueuePackets != 3 || c.DroppedQueueBytes != 3001 {
			t.Errorf("dropped %d packets, %d bytes from the queue; want 3, 3001", c.DroppedQueuePackets, c.DroppedQueueBytes)
		}
	})
	t.Run("a dropped packet consumes nothing", func(t *testing.T) {
		runScript(t, p, []step{
			offer(0, 1500, 1*ms), offer(0, 1500, 2*ms), offer(0, 1500, 3*ms),
			dropped(0, 1500, DropQueue), dropped(0, 1500, DropQueue),
			offer(3*ms, 1500, 4*ms), // the link was free at 3 ms: the drops took no time
		})
	})
	t.Run("QueueBytes is the backlog after the last decision and high water the largest ever", func(t *testing.T) {
		d := NewDirection(p)
		d.Offer(0, 1500)
		d.Offer(0, 1500)
		d.Offer(0, 1000)
		d.Offer(2500*us, 100) // at 2.5 ms only the 1000-byte packet is left (until 2.667 ms)
		c := d.Counters()
		if c.QueueBytes != 1100 || c.QueueHighWaterBytes != 4000 {
			t.Errorf("QueueBytes = %d, QueueHighWaterBytes = %d; want 1100, 4000", c.QueueBytes, c.QueueHighWaterBytes)
		}
		d.Offer(time.Hour.Nanoseconds(), DefaultMTU+1) // even a drop updates the backlog
		if c := d.Counters(); c.QueueBytes != 0 || c.QueueHighWaterBytes != 4000 {
			t.Errorf("an hour later: QueueBytes = %d, QueueHighWaterBytes = %d; want 0, 4000", c.QueueBytes, c.QueueHighWaterBytes)
		}
	})
	t.Run("the default queue limit is used when QueueBytes is 0", func(t *testing.T) {
		// 12 Mbit/s, no delay: the 4-MTU floor, 6000 bytes.
		runScript(t, Params{RateBps: 12_000_000}, []step{
			offer(0, 1500, 1*ms), offer(0, 1500, 2*ms), offer(0, 1500, 3*ms), offer(0, 1500, 4*ms),
			dropped(0, 1, DropQueue),
		})
	})
	t.Run("the ring buffer grows past its initial size and keeps order", func(t *testing.T) {
		d := NewDirection(Params{RateBps: 8_000_000, QueueBytes: 1 << 30}) // 1 byte per µs
		for i := int64(1); i <= 1000; i++ {
			if at, v := d.Offer(0, 100); v != Deliver || at != i*100*us {
				t.Fatalf("packet %d: %d %v, want %d deliver", i, at, v, i*100*us)
			}
		}
		for _, tc := range []struct{ now, backlog int64 }{{50 * ms, 50_000}, {50*ms + 1, 50_000}, {100*ms - 1, 100}, {100 * ms, 0}} {
			d.Offer(tc.now, 2000) // above the MTU: dropped, but the backlog is measured
			if got := d.Counters().QueueBytes; got != tc.backlog {
				t.Errorf("backlog at %d ns = %d, want %d", tc.now, got, tc.backlog)
			}
		}
	})
}

func TestDefaultQueueBytes(t *testing.T) {
	tests := []struct {
		name string
		p    Params
		want int64
	}{
		{"an unlimited rate has no queue", Params{Delay: time.Second}, 0},
		{"one bandwidth-delay product of the round trip: 10 Mbit/s, 50 ms each way", Params{RateBps: 10_000_000, Delay: 50 * time.Millisecond}, 125_000},
		{"at least 4 MTUs: 10 Mbit/s without delay", Params{RateBps: 10_000_000}, 6000},
		{"at least 4 MTUs: 9600 bit/s, 100 ms each way (240 bytes)", Params{RateBps: 9600, Delay: 100 * time.Millisecond}, 6000},
		{"the floor follows the MTU", Params{RateBps: 9600, MTU: 9000}, 36_000},
		{"a satellite hop: 2 Mbit/s, 327.5 ms each way", Params{RateBps: 2_000_000, Delay: 327_500 * time.Microsecond}, 163_750},
		{"10 Gbit/s over an hour does not overflow", Params{RateBps: 10_000_000_000, Delay: time.Hour}, 9_000_000_000_000},
		{"a trace uses its mean rate (12 Mbit/s)", Params{RateBps: 1, Delay: 50 * time.Millisecond, Trace: mustTrace(t, "1\n2\n3\n4\n")}, 150_000},
		{"a trace without opportunities is ignored", Params{RateBps: 10_000_000, Delay: 50 * time.Millisecond, Trace: &Trace{}}, 125_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DefaultQueueBytes(tt.p); got != tt.want {
				t.Errorf("DefaultQueueBytes = %d, want %d", got, tt.want)
			}
		})
	}
}
