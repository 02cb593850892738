package linkem

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

const (
	us = int64(time.Microsecond)
	ms = int64(time.Millisecond)
)

// step is one line of a scripted scenario: either a runtime change (set != nil)
// or an offer of size bytes at time at, with the expected outcome.
type step struct {
	at   int64
	set  *Params
	size int
	want int64 // deliverAt, when v == Deliver
	v    Verdict
}

func offer(at int64, size int, want int64) step  { return step{at: at, size: size, want: want} }
func dropped(at int64, size int, v Verdict) step { return step{at: at, size: size, v: v} }
func set(at int64, p Params) step                { return step{at: at, set: &p} }

// runScript plays steps on a new direction and checks every outcome to the ns.
func runScript(t *testing.T, p Params, steps []step) *Direction {
	t.Helper()
	d := NewDirection(p)
	for i, s := range steps {
		if s.set != nil {
			d.SetParams(s.at, *s.set)
			continue
		}
		got, v := d.Offer(s.at, s.size)
		if v != s.v || (v == Deliver && got != s.want) {
			t.Fatalf("step %d: Offer(%d, %d) = %d, %v; want %d, %v", i, s.at, s.size, got, v, s.want, s.v)
		}
	}
	return d
}

func TestDirectionTiming(t *testing.T) {
	const mbit12 = 12_000_000
	big := int64(1 << 30)
	tests := []struct {
		name  string
		p     Params
		steps []step
	}{
		{"delay only: each packet arrives exactly Delay after it was offered",
			Params{Delay: 10 * time.Millisecond},
			[]step{offer(0, 1500, 10*ms), offer(5*ms, 40, 15*ms), offer(5*ms, 1500, 15*ms)}},
		{"a 1500-byte packet at 12 Mbit/s serializes in exactly 1 ms",
			Params{RateBps: mbit12},
			[]step{offer(0, 1500, 1*ms)}},
		{"serialization comes before the delay",
			Params{RateBps: mbit12, Delay: 10 * time.Millisecond},
			[]step{offer(0, 1500, 11*ms)}},
		{"back-to-back packets queue behind each other",
			Params{RateBps: mbit12, Delay: 10 * time.Millisecond},
			[]step{offer(0, 1500, 11*ms), offer(0, 1500, 12*ms), offer(0, 750, 12*ms+500*us), offer(ms, 1500, 13*ms+500*us)}},
		{"an idle link starts serializing when the packet is offered",
			Params{RateBps: mbit12},
			[]step{offer(0, 1500, 1*ms), offer(5*ms, 1500, 6*ms), offer(6*ms, 1500, 7*ms)}},
		{"fractions of a ns carry over: 1 byte at 9600 bit/s, rounded up, never drifting",
			Params{RateBps: 9600, QueueBytes: big},
			[]step{offer(0, 1, 833_334), offer(0, 1, 1_666_667), offer(0, 1, 2_500_000), offer(0, 1, 3_333_334)}},
		{"an unlimited link adds only delay, however many packets arrive at once",
			Params{Delay: 7 * time.Millisecond},
			[]step{offer(0, 1500, 7*ms), offer(0, 1500, 7*ms), offer(0, 1500, 7*ms), offer(1, 64, 7*ms+1)}},
		{"a packet larger than the MTU is dropped, one of exactly the MTU is not",
			Params{MTU: 1000},
			[]step{dropped(0, 1001, DropMTU), offer(0, 1000, 0)}},
		{"MTU 0 means DefaultMTU",
			Params{},
			[]step{dropped(0, DefaultMTU+1, DropMTU), offer(0, DefaultMTU, 0)}},
		{"a down link drops every packet, and resumes when up again",
			Params{Delay: time.Millisecond, Down: true},
			[]step{dropped(0, 100, DropDown), set(ms, Params{Delay: time.Millisecond}), offer(2*ms, 100, 3*ms),
				set(4*ms, Params{Delay: time.Millisecond, Down: true}), dropped(4*ms, 100, DropDown), dropped(4*ms, 9999, DropDown)}},
		{"a rate change applies to packets offered after it",
			Params{RateBps: mbit12},
			[]step{offer(0, 1500, 1*ms), offer(0, 1500, 2*ms), set(0, Params{RateBps: 2 * mbit12}),
				offer(0, 1500, 2*ms+500*us), offer(10*ms, 1500, 10*ms+500*us), set(20*ms, Params{RateBps: mbit12 / 2}),
				offer(20*ms, 1500, 22*ms)}},
		{"going unlimited mid-stream does not let new packets overtake scheduled ones",
			Params{RateBps: mbit12},
			[]step{offer(0, 1500, 1*ms), offer(0, 1500, 2*ms), set(0, Params{}), offer(0, 1500, 2*ms), offer(3*ms, 1500, 3*ms)}},
		{"a lost packet still uses its serialization time",
			Params{RateBps: mbit12, Loss: 1},
			[]step{dropped(0, 1500, DropLoss), dropped(0, 1500, DropLoss), set(0, Params{RateBps: mbit12}), offer(0, 1500, 3*ms)}},
		{"a time earlier than the last one is treated as the last one",
			Params{Delay: time.Millisecond},
			[]step{offer(5*ms, 100, 6*ms), offer(4*ms, 100, 6*ms)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runScript(t, tt.p, tt.steps) })
	}
}

func TestCountersAddUp(t *testing.T) {
	d := NewDirection(Params{RateBps: 12_000_000, QueueBytes: 2500, MTU: 1000})
	d.Offer(0, 1000)  // queued
	d.Offer(0, 1000)  // queued
	d.Offer(0, 1000)  // queue full
	d.Offer(0, 1001)  // MTU
	d.Delivered(1000) // the plumbing wrote one out
	d.SetParams(0, Params{Down: true})
	d.Offer(0, 10) // down
	want := Counters{
		OfferedPackets: 5, OfferedBytes: 4011,
		DeliveredPackets: 1, DeliveredBytes: 1000,
		DroppedQueuePackets: 1, DroppedQueueBytes: 1000,
		DroppedOtherPackets: 2, DroppedOtherBytes: 1011,
		QueueBytes: 2000, QueueHighWaterBytes: 2000,
		ClassBytes: [NumClasses]uint64{ClassOther: 1000},
	}
	if got := d.Counters(); got != want {
		t.Errorf("Counters() = %+v\nwant %+v", got, want)
	}
}

func TestParamsReturnsWhatWasSet(t *testing.T) {
	p := Params{Delay: time.Second, RateBps: 1e6, Seed: 3}
	d := NewDirection(p)
	if d.Params() != p {
		t.Errorf("Params() = %+v, want %+v", d.Params(), p)
	}
	q := Params{Delay: time.Millisecond, Loss: 0.5}
	d.SetParams(0, q)
	if d.Params() != q {
		t.Errorf("after SetParams: Params() = %+v, want %+v", d.Params(), q)
	}
}

func TestThroughputNeverExceedsRate(t *testing.T) {
	for _, rate := range []int64{9600, 64_000, 1_544_000, 9_999_999, 100_000_000, 1_000_000_000, 10_000_000_000} {
		t.Run(fmt.Sprintf("%d bit/s, 10k packets offered at once", rate), func(t *testing.T) {
			d := NewDirection(Params{RateBps: rate, QueueBytes: 1 << 40})
			rng := rand.New(rand.NewPCG(uint64(rate), 1))
			var bits, last int64
			for i := 0; i < 10_000; i++ {
				size := 40 + rng.IntN(1461)
				bits += int64(size) * 8
				at, v := d.Offer(0, size)
				if v != Deliver {
					t.Fatalf("packet %d: %v", i, v)
				}
				// The first i+1 packets cannot have left before their bits
				// took their time at the rate.
				if min := ceilDiv(bits*1e9, rate); at < min {
					t.Fatalf("packet %d leaves at %d ns, before %d ns: faster than the rate", i, at, min)
				}
				last = at
			}
			// And the serializer does not drift either: it is exact to the ns.
			if want := ceilDiv(bits*1e9, rate); last != want {
				t.Errorf("last departure at %d ns, want exactly %d", last, want)
			}
		})
	}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func TestSetParamsKeepsStateAndRandomness(t *testing.T) {
	p := Params{RateBps: 50_000_000, Delay: 5 * time.Millisecond, Jitter: time.Millisecond,
		JitterDist: JitterNormal, Loss: 0.05, GE: &GilbertElliott{P: 0.01, R: 0.3, LossBad: 0.8}, Seed: 42}
	a, b := NewDirection(p), NewDirection(p)
	q := p
	q.GE = &GilbertElliott{P: 0.01, R: 0.3, LossBad: 0.8} // same values, another pointer
	for i := int64(0); i < 20_000; i++ {
		if i == 10_000 {
			b.SetParams(i*100*us, q) // no change at all
		}
		at1, v1 := a.Offer(i*100*us, 1000)
		at2, v2 := b.Offer(i*100*us, 1000)
		if at1 != at2 || v1 != v2 {
			t.Fatalf("packet %d: %d %v without SetParams, %d %v with an identical SetParams", i, at1, v1, at2, v2)
		}
	}
	if a.Counters() != b.Counters() {
		t.Errorf("counters differ: %+v vs %+v", a.Counters(), b.Counters())
	}
}

func TestSameSeedSameResults(t *testing.T) {
	p := Params{RateBps: 20_000_000, Delay: 20 * time.Millisecond, Jitter: 3 * time.Millisecond,
		JitterDist: JitterParetoNormal, Reorder: true, Loss: 0.02, GE: &GilbertElliott{P: 0.02, R: 0.25, LossBad: 1}}
	run := func(seed int64) []int64 {
		p := p
		p.Seed = seed
		d := NewDirection(p)
		out := make([]int64, 0, 5000)
		for i := int64(0); i < 5000; i++ {
			at, v := d.Offer(i*400*us, 1200)
			out = append(out, at*8+int64(v))
		}
		return out
	}
	equal := func(a, b []int64) bool {
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	t.Run("the same seed gives identical verdicts and times", func(t *testing.T) {
		if !equal(run(7), run(7)) {
			t.Error("two runs with seed 7 differ")
		}
	})
	t.Run("a different seed gives different results", func(t *testing.T) {
		if equal(run(7), run(8)) {
			t.Error("seeds 7 and 8 give identical results")
		}
	})
	t.Run("changing the seed at runtime reseeds", func(t *testing.T) {
		p := p
		p.Seed = 7
		d := NewDirection(p)
		p.Seed = 8
		d.SetParams(0, p)
		fresh := NewDirection(p)
		for i := int64(0); i < 1000; i++ {
			at1, v1 := d.Offer(i*400*us, 1200)
			at2, v2 := fresh.Offer(i*400*us, 1200)
			if at1 != at2 || v1 != v2 {
				t.Fatalf("packet %d: %d %v after reseeding, %d %v from a fresh direction", i, at1, v1, at2, v2)
			}
		}
	})
}

func TestOfferDoesNotAllocate(t *testing.T) {
	d := NewDirection(Params{RateBps: 100_000_000, Delay: 20 * time.Millisecond, Jitter: time.Millisecond,
		JitterDist: JitterNormal, Loss: 0.01, GE: &GilbertElliott{P: 0.01, R: 0.5, LossBad: 0.5}})
	now := int64(0)
	for i := 0; i < 10_000; i++ { // let the ring buffer reach its working size
		d.Offer(now, 1500)
		now += 100 * us
	}
	allocs := testing.AllocsPerRun(10_000, func() {
		d.Offer(now, 1500)
		now += 100 * us
	})
	if allocs != 0 {
		t.Errorf("Offer allocates %.2f times per call in steady state, want 0", allocs)
	}
}

func BenchmarkOffer(b *testing.B) {
	tr := mustTrace(b, "1\n1\n2\n3\n5\n8\n13\n21\n")
	cases := []struct {
		name string
		p    Params
		gap  int64
	}{
		{"ideal", Params{}, 1 * us},
		{"delay+rate+queue", Params{Delay: 20 * time.Millisecond, RateBps: 100_000_000}, 100 * us},
		{"delay+rate+queue+normal-jitter+loss+gemodel", Params{Delay: 20 * time.Millisecond, RateBps: 100_000_000,
			Jitter: 2 * time.Millisecond, JitterDist: JitterNormal, Loss: 0.01,
			GE: &GilbertElliott{P: 0.01, R: 0.3, LossBad: 0.9}}, 100 * us},
		{"trace", Params{Delay: 20 * time.Millisecond, Trace: tr}, 3 * ms},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			d := NewDirection(c.p)
			now := int64(0)
			b.ReportAllocs()
			for b.Loop() {
				d.Offer(now, 1400)
				now += c.gap
			}
		})
	}
}
