package fake

import (
	"testing"
	"time"

	"replab/internal/linkem"
)

// A change crosses a link as one packet through the link model: queued
// behind the changes before it, serialized at the rate, then delayed.
func TestLinkDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n float64) time.Time { return t0.Add(time.Duration(n * float64(time.Millisecond))) }
	p := linkem.Params{RateBps: 8000, Delay: 50 * time.Millisecond} // 1 byte per ms
	var lc linkClocks
	for _, tc := range []struct {
		name     string
		now      time.Time
		size     int
		p        linkem.Params
		wantDue  time.Time
		wantFree time.Time
	}{
		{"an idle link: serialization, then the delay", ms(0), 100, p, ms(150), ms(100)},
		{"behind the one before", ms(10), 100, p, ms(250), ms(200)},
		{"after the link went idle", ms(500), 20, p, ms(570), ms(520)},
		{"an unlimited rate costs no time", ms(600), 1000, linkem.Params{Delay: 5 * time.Millisecond}, ms(605), ms(600)},
		{"the link changed while running: the new rate and delay", ms(700), 100, linkem.Params{RateBps: 80000, Delay: time.Millisecond}, ms(711), ms(710)},
	} {
		if due := lc.cross("a", "b", tc.now, tc.size, tc.p); !due.Equal(tc.wantDue) || !lc.free[[2]string{"a", "b"}].Equal(tc.wantFree) {
			t.Errorf("%s: due %v, free %v; want %v, %v", tc.name, due.Sub(t0), lc.free[[2]string{"a", "b"}].Sub(t0), tc.wantDue.Sub(t0), tc.wantFree.Sub(t0))
		}
	}
	if due := lc.cross("b", "a", ms(0), 100, p); !due.Equal(ms(150)) {
		t.Errorf("the other direction has a clock of its own: due %v", due.Sub(t0))
	}
}
