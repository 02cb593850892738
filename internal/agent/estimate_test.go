package agent

import (
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func TestEstimator(t *testing.T) {
	// The agent's clock is 300 ms ahead. Each case is a list of pings,
	// each with its time there and back and the agent's own time.
	type ping struct{ there, back, inside int64 }
	const off = 300 * ms
	cases := []struct {
		name      string
		pings     []ping
		wantBound int64
	}{
		{"symmetric", []ping{{10 * ms, 10 * ms, 1 * ms}}, 10 * ms},
		{"asymmetric: the bound still holds", []ping{{2 * ms, 18 * ms, 0}}, 10 * ms},
		{"one queued behind data is not used", []ping{{10 * ms, 10 * ms, 0}, {10 * ms, 90 * ms, 0}, {11 * ms, 10 * ms, 0}}, 10 * ms},
		{"the tightest wins", []ping{{30 * ms, 30 * ms, 0}, {5 * ms, 6 * ms, 0}}, 5500_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var e estimator
			now := int64(1e12)
			for _, p := range tc.pings {
				t1 := now
				t2 := t1 + p.there + off
				t3 := t2 + p.inside
				t4 := t3 - off + p.back
				e.add(t1, t2, t3, t4)
				now = t4 + 1
			}
			got, bound, ok := e.estimate(now)
			if !ok {
				t.Fatal("no estimate")
			}
			if d := got - off; d > bound || -d > bound {
				t.Errorf("offset %d ms ± %d µs: the true 300 ms is outside", got/ms, bound/1000)
			}
			if bound > tc.wantBound+100_000 || bound < tc.wantBound-100_000 { // plus the drift allowance of the sample's age
				t.Errorf("bound %d µs, want about %d µs", bound/1000, tc.wantBound/1000)
			}
		})
	}
}

func TestEstimatorDriftAndWindow(t *testing.T) {
	var e estimator
	e.add(0, 5*ms, 5*ms, 10*ms) // offset 0 ± 5 ms
	_, b0, _ := e.estimate(10 * ms)
	_, b1, _ := e.estimate(10*ms + int64(10*time.Second))
	if want := b0 + int64(10*time.Second)*DriftPPM/1_000_000; b1 != want {
		t.Errorf("bound after 10 s: %d ns, want %d (+%d ppm of the age)", b1, want, DriftPPM)
	}
	// Samples older than the window go.
	late := int64(window) + 20*ms
	e.add(late, late+20*ms, late+20*ms, late+40*ms)
	if len(e.samples) != 1 {
		t.Errorf("%d samples kept, want 1: the first is older than %s", len(e.samples), window)
	}
	var empty estimator
	if _, _, ok := empty.estimate(0); ok {
		t.Error("an estimate without samples")
	}
}
