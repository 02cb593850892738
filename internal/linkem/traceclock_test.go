package linkem

import (
	"strings"
	"testing"
	"time"
)

func mustTrace(t testing.TB, text string) *Trace {
	t.Helper()
	tr, err := ParseTrace("test.trace", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTrace(t *testing.T) {
	const e = 10 * ms // the epoch: the first offer's now
	big := int64(1 << 30)
	every1ms := mustTrace(t, "1\n2\n3\n4\n")
	tests := []struct {
		name  string
		p     Params
		steps []step
	}{
		{"trace 1,2,3,4 gives one 1500-byte packet per ms and wraps around after the 4 ms period",
			Params{Trace: every1ms, QueueBytes: big},
			[]step{offer(e, 1500, e+1*ms), offer(e, 1500, e+2*ms), offer(e, 1500, e+3*ms), offer(e, 1500, e+4*ms),
				offer(e, 1500, e+5*ms), offer(e, 1500, e+6*ms), offer(e, 1500, e+7*ms), offer(e, 1500, e+8*ms),
				offer(e, 1500, e+9*ms)}},
		{"the epoch is the first offer's now, not the creation",
			Params{Trace: every1ms},
			[]step{offer(e+300*us, 1500, e+300*us+1*ms), offer(e+300*us, 1500, e+300*us+2*ms)}},
		{"an opportunity serves a packet offered exactly at its time",
			Params{Trace: every1ms},
			[]step{offer(e, 100, e+ms), offer(e+2*ms, 100, e+2*ms)}},
		{"the bytes of an opportunity that finds no packet waiting are wasted",
			Params{Trace: every1ms},
			[]step{offer(e, 1500, e+1*ms), offer(e+2*ms+500*us, 1500, e+3*ms), offer(e+10*ms+1, 1500, e+11*ms)}},
		{"small packets share an opportunity while they are waiting for it",
			Params{Trace: every1ms},
			[]step{offer(e, 500, e+1*ms), offer(e+500*us, 500, e+1*ms), // 500 bytes left at 1 ms
				offer(e+700*us, 1000, e+2*ms), // the last 500 of 1 ms and 500 of 2 ms
				offer(e+2*ms+1, 200, e+3*ms),  // the 1000 left at 2 ms were wasted
				offer(e+3*ms, 1300, e+3*ms),   // exactly the 1300 left at 3 ms
				offer(e+3*ms, 1, e+4*ms)}},    // nothing left at 3 ms
		{"a 3000-byte packet takes two opportunities",
			Params{Trace: every1ms, MTU: 9000},
			[]step{offer(e, 3000, e+2*ms), offer(e, 1500, e+3*ms), offer(e, 4000, e+6*ms), offer(e, 500, e+6*ms)}},
		{"repeated timestamps are several opportunities in the same millisecond",
			Params{Trace: mustTrace(t, "1\n1\n3\n"), QueueBytes: big},
			[]step{offer(e, 1500, e+1*ms), offer(e, 1500, e+1*ms), offer(e, 1500, e+3*ms),
				offer(e, 1500, e+4*ms), offer(e, 1500, e+4*ms), offer(e, 1500, e+6*ms)}},
		{"a trace with an opportunity at 0 ms wraps onto the period's end",
			Params{Trace: mustTrace(t, "0\n2\n"), QueueBytes: big},
			[]step{offer(e, 1500, e), offer(e, 1500, e+2*ms), offer(e, 1500, e+2*ms), offer(e, 1500, e+4*ms), offer(e, 1500, e+4*ms)}},
		{"the delay is added after the opportunity",
			Params{Trace: every1ms, Delay: 20 * time.Millisecond},
			[]step{offer(e, 1500, e+21*ms), offer(e, 1500, e+22*ms)}},
		{"the queue is byte-limited as with a rate (default: 4 MTUs here)",
			Params{Trace: every1ms},
			[]step{offer(e, 1500, e+1*ms), offer(e, 1500, e+2*ms), offer(e, 1500, e+3*ms), offer(e, 1500, e+4*ms),
				dropped(e, 1500, DropQueue), offer(e+1*ms, 1500, e+5*ms)}},
		{"a trace set at runtime starts at SetParams' now, after the packets already accepted",
			Params{RateBps: 12_000_000, QueueBytes: big},
			[]step{offer(e, 1500, e+1*ms), offer(e, 1500, e+2*ms), offer(e, 1500, e+3*ms),
				set(e+500*us, Params{Trace: every1ms, QueueBytes: big}),
				offer(e+500*us, 1500, e+3*ms+500*us), // opportunities at e+1.5, 2.5, 3.5 ms...: the first free one
				offer(e+9*ms, 1500, e+9*ms+500*us)}},
		{"the same trace passed again keeps running; a different one restarts at now",
			Params{Trace: every1ms},
			[]step{offer(e, 1500, e+1*ms),
				set(e+300*us, Params{Trace: every1ms, Delay: time.Millisecond}),
				offer(e+300*us, 1500, e+3*ms), // opportunity at e+2 ms, plus 1 ms delay
				set(e+2*ms+300*us, Params{Trace: mustTrace(t, "1\n2\n3\n4\n")}),
				offer(e+2*ms+300*us, 1500, e+3*ms+300*us)}},
		{"removing the trace goes back to the rate, after the packets already accepted",
			Params{Trace: every1ms, RateBps: 12_000_000},
			[]step{offer(e, 1500, e+1*ms), offer(e, 1500, e+2*ms),
				set(e, Params{RateBps: 12_000_000}),
				offer(e, 1500, e+3*ms), offer(e+10*ms, 1500, e+11*ms)}},
		{"a trace without opportunities is ignored",
			Params{Trace: &Trace{Name: "empty"}, RateBps: 12_000_000},
			[]step{offer(e, 1500, e+1*ms)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runScript(t, tt.p, tt.steps) })
	}
}

func TestTraceThroughputMatchesMeanRate(t *testing.T) {
	// A saturated trace link delivers exactly one opportunity's bytes per
	// opportunity: 10 repetitions of a 21 ms period with 8 opportunities.
	tr := mustTrace(t, "1\n1\n2\n3\n5\n8\n13\n21\n")
	d := NewDirection(Params{Trace: tr, QueueBytes: 1 << 30})
	var last int64
	for i := 0; i < 80; i++ {
		at, v := d.Offer(0, 1500)
		if v != Deliver || at < last {
			t.Fatalf("packet %d: %d %v after %d", i, at, v, last)
		}
		last = at
	}
	if want := 10 * 21 * ms; last != want {
		t.Errorf("the 80th packet leaves at %d, want %d", last, want)
	}
}
