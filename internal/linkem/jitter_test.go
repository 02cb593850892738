package linkem

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var allDists = []JitterDist{JitterNone, JitterUniform, JitterNormal, JitterParetoNormal}

func distName(d JitterDist) string {
	if d == JitterNone {
		return "default (uniform)"
	}
	return string(d)
}

func TestJitterWithoutReorderNeverReorders(t *testing.T) {
	for _, dist := range allDists {
		t.Run(distName(dist)+": 100k packets arrive in the order they were offered", func(t *testing.T) {
			d := NewDirection(Params{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond,
				JitterDist: dist, RateBps: 100_000_000, QueueBytes: 1 << 30, Seed: 1})
			rng := rand.New(rand.NewPCG(2, 3))
			var now, last int64
			for i := 0; i < 100_000; i++ {
				now += rng.Int64N(200 * us) // bursts and gaps
				at, v := d.Offer(now, 40+rng.IntN(1461))
				if v != Deliver {
					t.Fatalf("packet %d: %v", i, v)
				}
				if at < last {
					t.Fatalf("packet %d delivered at %d, before packet %d at %d", i, at, i-1, last)
				}
				if at < now {
					t.Fatalf("packet %d delivered at %d, before it was offered at %d", i, at, now)
				}
				last = at
			}
		})
	}
}

func TestUniformJitterStaysWithinBounds(t *testing.T) {
	const delay, j = 10 * ms, 5 * ms
	tests := []struct {
		name    string
		reorder bool
		gap     int64 // between offers
		covers  bool  // the whole range must be reached
	}{
		{"with reorder: delay in [Delay-Jitter, Delay+Jitter], and the whole range is used", true, 50 * us, true},
		{"without reorder, packets far apart: the same", false, 2 * (delay + j), true},
		{"without reorder, packets 50 µs apart: never more than Delay+Jitter", false, 50 * us, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDirection(Params{Delay: time.Duration(delay), Jitter: time.Duration(j), Reorder: tt.reorder, Seed: 4})
			lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
			for i := int64(0); i < 100_000; i++ {
				now := i * tt.gap
				at, _ := d.Offer(now, 100)
				lo, hi = min(lo, at-now), max(hi, at-now)
			}
			if lo < delay-j || hi > delay+j {
				t.Errorf("delays in [%d, %d] ns, want within [%d, %d]", lo, hi, delay-j, delay+j)
			}
			if tt.covers && (lo > delay-j+10*us || hi < delay+j-10*us) {
				t.Errorf("delays in [%d, %d] ns do not cover [%d, %d]", lo, hi, delay-j, delay+j)
			}
		})
	}
}

func TestJitterIsClampedAtSerializationEnd(t *testing.T) {
	for _, dist := range allDists {
		t.Run(distName(dist)+": a packet is never delivered before it has been serialized", func(t *testing.T) {
			// 12 Mbit/s: a 1500-byte packet offered to an idle link leaves at now + 1 ms.
			d := NewDirection(Params{Delay: time.Millisecond, Jitter: 10 * time.Millisecond, JitterDist: dist,
				Reorder: true, RateBps: 12_000_000, Seed: 5})
			clamped := 0
			for i := int64(0); i < 10_000; i++ {
				now := i * 10 * ms
				at, _ := d.Offer(now, 1500)
				if at < now+ms {
					t.Fatalf("packet %d delivered at %d ns, before its serialization ended at %d", i, at, now+ms)
				}
				if at == now+ms {
					clamped++
				}
			}
			if clamped == 0 {
				t.Error("no packet was clamped; the test does not test the clamp")
			}
		})
	}
}

func TestJitterWithReorderReorders(t *testing.T) {
	for _, dist := range allDists {
		t.Run(distName(dist)+": some packets overtake others", func(t *testing.T) {
			d := NewDirection(Params{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, JitterDist: dist, Reorder: true, Seed: 6})
			var last int64
			reordered := 0
			const n = 10_000
			for i := int64(0); i < n; i++ {
				at, _ := d.Offer(i*500*us, 100)
				if at < last {
					reordered++
				}
				last = max(last, at)
			}
			if reordered < n/100 {
				t.Errorf("%d of %d packets reordered, want at least 1%%", reordered, n)
			}
		})
	}
}

// jitterSamples offers n packets far apart on a link with a large delay, so
// neither clamp applies, and returns deliverAt - now - Delay for each.
func jitterSamples(t *testing.T, dist JitterDist, j time.Duration, n int) []float64 {
	t.Helper()
	const delay = 100 * ms
	d := NewDirection(Params{Delay: time.Duration(delay), Jitter: j, JitterDist: dist, Reorder: true, Seed: 9})
	out := make([]float64, n)
	for i := range out {
		now := int64(i) * ms
		at, v := d.Offer(now, 100)
		if v != Deliver {
			t.Fatalf("packet %d: %v", i, v)
		}
		out[i] = float64(at - now - delay)
	}
	return out
}

func meanSigma(xs []float64) (mean, sigma float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sigma += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sigma / float64(len(xs)-1))
}

func TestJitterSigma(t *testing.T) {
	const j = 2 * time.Millisecond
	tests := []struct {
		dist      JitterDist
		name      string
		meanTol   float64 // |mean| / J
		wantSigma float64 // in units of J
	}{
		{JitterNormal, "normal: sample sigma within 5% of Jitter, mean about 0", 0.02, 1},
		{JitterParetoNormal, "paretonormal: sample sigma within 5% of Jitter, mean slightly negative", 0.05, 1},
		{JitterUniform, "uniform: sample sigma within 5% of Jitter/sqrt(3)", 0.02, 1 / math.Sqrt(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			xs := jitterSamples(t, tt.dist, j, 100_000)
			mean, sigma := meanSigma(xs)
			want := tt.wantSigma * float64(j)
			if math.Abs(sigma-want) > 0.05*want {
				t.Errorf("sigma = %.0f ns, want %.0f ns ± 5%%", sigma, want)
			}
			if math.Abs(mean) > tt.meanTol*float64(j) {
				t.Errorf("mean = %.0f ns, want within ±%.0f ns", mean, tt.meanTol*float64(j))
			}
		})
	}
	t.Run("paretonormal: skewed to the right like netem's table", func(t *testing.T) {
		xs := jitterSamples(t, JitterParetoNormal, j, 100_000)
		lo, hi := math.Inf(1), math.Inf(-1)
		var skew float64
		mean, sigma := meanSigma(xs)
		for _, x := range xs {
			lo, hi = min(lo, x), max(hi, x)
			z := (x - mean) / sigma
			skew += z * z * z
		}
		skew /= float64(len(xs))
		if skew < 0.5 {
			t.Errorf("skewness = %.2f, want clearly positive", skew)
		}
		if lo < -2*float64(j) || hi > 5*float64(j) || hi < 4*float64(j) {
			t.Errorf("range [%.0f, %.0f] ns, want within [-2J, 5J] and reaching above 4J (J = %d ns)", lo, hi, j)
		}
	})
}

func TestJitterDoesNotChangeLoss(t *testing.T) {
	base := Params{Delay: 10 * time.Millisecond, RateBps: 10_000_000, Loss: 0.1,
		GE: &GilbertElliott{P: 0.05, R: 0.3, LossBad: 0.7}, Reorder: true, Seed: 11}
	withJitter := base
	withJitter.Jitter, withJitter.JitterDist = 3*time.Millisecond, JitterNormal
	a, b := NewDirection(base), NewDirection(withJitter)
	for i := int64(0); i < 50_000; i++ {
		_, va := a.Offer(i*ms, 1000)
		_, vb := b.Offer(i*ms, 1000)
		if va != vb {
			t.Fatalf("packet %d: %v without jitter, %v with jitter", i, va, vb)
		}
	}
}

func TestLossDoesNotChangeJitter(t *testing.T) {
	base := Params{Delay: 10 * time.Millisecond, Jitter: 3 * time.Millisecond, JitterDist: JitterNormal, Reorder: true, Seed: 12}
	lossy := base
	lossy.Loss = 0.3
	a, b := NewDirection(base), NewDirection(lossy)
	for i := int64(0); i < 50_000; i++ {
		ta, _ := a.Offer(i*ms, 1000)
		tb, vb := b.Offer(i*ms, 1000)
		if vb == Deliver && ta != tb {
			t.Fatalf("packet %d: delivered at %d without loss, at %d with loss", i, ta, tb)
		}
	}
}
