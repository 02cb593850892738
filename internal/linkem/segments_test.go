package linkem

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// deliver and lose build expected pieces.
func deliver(first, n, bytes int, at int64) Piece {
	return Piece{First: first, N: n, Bytes: bytes, V: Deliver, At: at}
}

func lose(first, n, bytes int, v Verdict) Piece {
	return Piece{First: first, N: n, Bytes: bytes, V: v}
}

func TestOfferSegmentsTiming(t *testing.T) {
	const span = 20 * us
	// A TSO super-packet of 44 full segments: 1500 bytes each on the wire.
	tso := Segments{N: 44, Size: 1500}
	tests := []struct {
		name    string
		p       Params
		now     int64
		s       Segments
		maxSpan int64
		want    []Piece
	}{
		{"an unlimited link delivers the whole super-packet as one piece, exactly Delay later",
			Params{Delay: 25 * time.Millisecond}, 3 * ms, Segments{N: 44, Size: 1500, Last: 700}, span,
			[]Piece{deliver(0, 44, 43*1500+700, 28*ms)}},
		{"the same with no span at all: every segment has the same time",
			Params{Delay: 25 * time.Millisecond}, 0, tso, 0,
			[]Piece{deliver(0, 44, 44*1500, 25*ms)}},
		{"at 10 Gbit/s (1.2 µs per MTU) a piece spans at most 20 µs: 17 + 17 + 10 segments, each due with its last",
			Params{Delay: 25 * time.Millisecond, RateBps: 10_000_000_000}, 0, tso, span,
			[]Piece{
				deliver(0, 17, 17*1500, 25*ms+17*1200),  // segments due at 1.2 … 20.4 µs
				deliver(17, 17, 17*1500, 25*ms+34*1200), // 21.6 … 40.8 µs
				deliver(34, 10, 10*1500, 25*ms+44*1200), // 42.0 … 52.8 µs
			}},
		{"at 10 Gbit/s with a span of a whole super-packet it is one piece",
			Params{Delay: 25 * time.Millisecond, RateBps: 10_000_000_000}, 0, tso, 60 * us,
			[]Piece{deliver(0, 44, 44*1500, 25*ms+44*1200)}},
		{"at 1 Gbit/s (12 µs per MTU) two segments fit in 20 µs",
			Params{RateBps: 1_000_000_000, QueueBytes: 1 << 20}, 0, Segments{N: 5, Size: 1500}, span,
			[]Piece{deliver(0, 2, 3000, 24*us), deliver(2, 2, 3000, 48*us), deliver(4, 1, 1500, 60*us)}},
		{"at 100 Mbit/s (120 µs per MTU) every segment is its own piece, as if offered alone",
			Params{RateBps: 100_000_000}, ms, Segments{N: 3, Size: 1500, Last: 1000}, span,
			[]Piece{deliver(0, 1, 1500, ms+120*us), deliver(1, 1, 1500, ms+240*us), deliver(2, 1, 1000, ms+320*us)}},
		{"a short last segment joins the piece before it when it is due within the span",
			Params{RateBps: 100_000_000}, ms, Segments{N: 3, Size: 1500, Last: 100}, span,
			[]Piece{deliver(0, 1, 1500, ms+120*us), deliver(1, 2, 1600, ms+248*us)}},
		{"the queue admits segment by segment in bytes: the third does not fit, the smaller last one does",
			Params{RateBps: 12_000_000, QueueBytes: 4000}, 0, Segments{N: 4, Size: 1500, Last: 900}, ms,
			[]Piece{deliver(0, 2, 3000, 2*ms), lose(2, 1, 1500, DropQueue), deliver(3, 1, 900, 2*ms+600*us)}},
		{"a full queue drops the rest of the super-packet as one piece",
			Params{RateBps: 12_000_000, QueueBytes: 4500}, 0, Segments{N: 10, Size: 1500}, 0,
			[]Piece{deliver(0, 1, 1500, ms), deliver(1, 1, 1500, 2*ms), deliver(2, 1, 1500, 3*ms), lose(3, 7, 7*1500, DropQueue)}},
		{"a lost segment is dropped alone and splits the super-packet around it",
			// Gilbert-Elliott with P = R = 1, lossless good and lossy bad
			// state alternates: every second segment is lost.
			Params{Delay: time.Millisecond, GE: &GilbertElliott{P: 1, R: 1, LossBad: 1}}, 0, Segments{N: 5, Size: 1500, Last: 40}, span,
			[]Piece{deliver(0, 1, 1500, ms), lose(1, 1, 1500, DropLoss), deliver(2, 1, 1500, ms), lose(3, 1, 1500, DropLoss), deliver(4, 1, 40, ms)}},
		{"lost segments keep their serialization time",
			Params{RateBps: 12_000_000, GE: &GilbertElliott{P: 1, R: 1, LossBad: 1}}, 0, Segments{N: 3, Size: 1500}, 5 * ms,
			[]Piece{deliver(0, 1, 1500, ms), lose(1, 1, 1500, DropLoss), deliver(2, 1, 1500, 3*ms)}},
		{"with 100 % loss every segment is lost: one piece",
			Params{Loss: 1}, 0, tso, span,
			[]Piece{lose(0, 44, 44*1500, DropLoss)}},
		{"segments larger than the MTU are dropped",
			Params{MTU: 1400}, 0, Segments{N: 3, Size: 1500, Last: 1000}, span,
			[]Piece{lose(0, 2, 3000, DropMTU), deliver(2, 1, 1000, 0)}},
		{"a down link drops the whole super-packet",
			Params{Down: true}, 0, tso, span,
			[]Piece{lose(0, 44, 44*1500, DropDown)}},
		{"a single segment is one piece",
			Params{Delay: time.Millisecond}, 0, Segments{N: 1, Size: 60}, span,
			[]Piece{deliver(0, 1, 60, ms)}},
		{"no segments, no pieces",
			Params{}, 0, Segments{}, span, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDirection(tt.p)
			got := d.OfferSegments(tt.now, tt.s, tt.maxSpan, nil)
			if !slices.Equal(got, tt.want) {
				t.Errorf("pieces\n got %+v\nwant %+v", got, tt.want)
			}
			c := d.Counters()
			if c.OfferedPackets != uint64(tt.s.N) || c.OfferedBytes != uint64(tt.s.Bytes()) {
				t.Errorf("offered %d packets, %d bytes; want %d, %d", c.OfferedPackets, c.OfferedBytes, tt.s.N, tt.s.Bytes())
			}
		})
	}
}

func TestOfferSegmentsFollowsThePacketsOneByOne(t *testing.T) {
	tr := mustTrace(t, "0\n1\n1\n2\n4\n")
	params := []Params{
		{Delay: 25 * time.Millisecond},
		{RateBps: 10_000_000_000, Delay: 25 * time.Millisecond},
		{RateBps: 1_000_000_000, Delay: 25 * time.Millisecond, QueueBytes: 200_000, Loss: 0.01},
		{RateBps: 100_000_000, Delay: 5 * time.Millisecond, Loss: 0.05, GE: &GilbertElliott{P: 0.02, R: 0.3, LossBad: 0.9}},
		{RateBps: 1_000_000_000, Delay: 10 * time.Millisecond, Jitter: 30 * time.Microsecond, JitterDist: JitterNormal},
		{RateBps: 2_000_000_000, Delay: 10 * time.Millisecond, Jitter: 100 * time.Microsecond, Reorder: true, Loss: 0.02},
		{Delay: 2 * time.Millisecond, Trace: tr, MTU: 1400},
	}
	for i, p := range params {
		for _, span := range []int64{0, 5 * us, 20 * us, 100 * us} {
			t.Run(fmt.Sprintf("params %d, span %d µs", i, span/us), func(t *testing.T) {
				p := p
				p.Seed = int64(i)
				one, super := NewDirection(p), NewDirection(p)
				rng := rand.New(rand.NewPCG(uint64(i), uint64(span)))
				now := int64(0)
				var pieces []Piece
				var lostOne, lostSuper int
				for k := 0; k < 3000; k++ {
					now += rng.Int64N(100 * us)
					s := Segments{N: 1 + rng.IntN(44), Size: 1500 - rng.IntN(2)*200}
					if rng.IntN(2) == 0 {
						s.Last = 52 + rng.IntN(s.Size-52)
					}
					// The segments one by one, on a twin direction.
					ats := make([]int64, s.N)
					vs := make([]Verdict, s.N)
					for j := range s.N {
						ats[j], vs[j] = one.Offer(now, s.size(j))
						if vs[j] == DropLoss {
							lostOne++
						}
					}
					pieces = super.OfferSegments(now, s, span, pieces[:0])
					next := 0
					for _, pc := range pieces {
						if pc.First != next || pc.N < 1 {
							t.Fatalf("super-packet %d: pieces %+v do not cover the segments in order", k, pieces)
						}
						bytes := 0
						var latest int64
						for j := pc.First; j < pc.First+pc.N; j++ {
							bytes += s.size(j)
							if vs[j] != pc.V {
								t.Fatalf("super-packet %d, segment %d: %v alone, %v in a piece", k, j, vs[j], pc.V)
							}
							if pc.V == DropLoss {
								lostSuper++
							}
							if pc.V == Deliver {
								if ats[j] > pc.At || ats[j] < pc.At-span {
									t.Fatalf("super-packet %d, segment %d: due at %d alone, its piece at %d (span %d)", k, j, ats[j], pc.At, span)
								}
								latest = max(latest, ats[j])
							}
						}
						if pc.V == Deliver && latest != pc.At {
							t.Fatalf("super-packet %d: piece %+v is due at %d, its latest segment at %d", k, pc, pc.At, latest)
						}
						if bytes != pc.Bytes {
							t.Fatalf("super-packet %d: piece %+v counts %d bytes, its segments %d", k, pc, pc.Bytes, bytes)
						}
						next = pc.First + pc.N
					}
					if next != s.N {
						t.Fatalf("super-packet %d: pieces %+v end at segment %d of %d", k, pieces, next, s.N)
					}
				}
				if one.Counters() != super.Counters() {
					t.Errorf("counters one by one %+v\nas super-packets %+v", one.Counters(), super.Counters())
				}
				if lostOne != lostSuper {
					t.Errorf("lost %d segments one by one, %d as super-packets", lostOne, lostSuper)
				}
			})
		}
	}
}

func TestDeliveredSegmentsCounts(t *testing.T) {
	d := NewDirection(Params{})
	d.DeliveredSegments(44, 44*1500, ClassReplication)
	d.Delivered(60)
	c := d.Counters()
	if c.DeliveredPackets != 45 || c.DeliveredBytes != 44*1500+60 {
		t.Errorf("delivered %d packets, %d bytes; want 45, %d", c.DeliveredPackets, c.DeliveredBytes, 44*1500+60)
	}
	if want := [NumClasses]uint64{ClassOther: 60, ClassReplication: 44 * 1500}; c.ClassBytes != want {
		t.Errorf("bytes by class %v; want %v", c.ClassBytes, want)
	}
}

func TestOfferSegmentsDoesNotAllocate(t *testing.T) {
	d := NewDirection(Params{RateBps: 10_000_000_000, Delay: 25 * time.Millisecond, Loss: 0.01})
	out := make([]Piece, 0, 64)
	now := int64(0)
	for range 1000 {
		out = d.OfferSegments(now, Segments{N: 44, Size: 1500}, 20*us, out[:0])
		now += 60 * us
	}
	allocs := testing.AllocsPerRun(1000, func() {
		out = d.OfferSegments(now, Segments{N: 44, Size: 1500}, 20*us, out[:0])
		now += 60 * us
	})
	if allocs != 0 {
		t.Errorf("OfferSegments allocates %.2f times per call in steady state, want 0", allocs)
	}
}

func BenchmarkOfferSegments(b *testing.B) {
	d := NewDirection(Params{RateBps: 10_000_000_000, Delay: 25 * time.Millisecond})
	out := make([]Piece, 0, 64)
	now := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		out = d.OfferSegments(now, Segments{N: 44, Size: 1500}, 20*us, out[:0])
		now += 53 * us
	}
}
