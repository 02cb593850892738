package linkem

import (
	"fmt"
	"math"
	"testing"
)

// offerMany offers n 100-byte packets 1 ms apart on an otherwise ideal link
// and returns the verdicts' loss pattern.
func offerMany(p Params, n int) []bool {
	d := NewDirection(p)
	lost := make([]bool, n)
	for i := range lost {
		_, v := d.Offer(int64(i)*ms, 100)
		lost[i] = v == DropLoss
	}
	return lost
}

func TestRandomLoss(t *testing.T) {
	const n, p = 200_000, 0.01
	// 99.9% two-sided normal approximation of the binomial interval.
	mean, sd := n*p, math.Sqrt(n*p*(1-p))
	lo, hi := mean-3.29*sd, mean+3.29*sd
	for seed := int64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprintf("1%% over 200k packets falls in the 99.9%% binomial interval (seed %d)", seed), func(t *testing.T) {
			lost := 0
			for _, l := range offerMany(Params{Loss: p, Seed: seed}, n) {
				if l {
					lost++
				}
			}
			if float64(lost) < lo || float64(lost) > hi {
				t.Errorf("%d lost, want within [%.0f, %.0f]", lost, lo, hi)
			}
		})
	}
	t.Run("loss 0 loses nothing and loss 1 loses everything", func(t *testing.T) {
		for i, l := range offerMany(Params{Loss: 0}, 1000) {
			if l {
				t.Fatalf("packet %d lost with Loss 0", i)
			}
		}
		for i, l := range offerMany(Params{Loss: 1}, 1000) {
			if !l {
				t.Fatalf("packet %d not lost with Loss 1", i)
			}
		}
	})
}

// lossStats returns the loss rate and the mean length of runs of losses.
func lossStats(lost []bool) (rate, meanBurst float64) {
	losses, bursts := 0, 0
	for i, l := range lost {
		if l {
			losses++
			if i == 0 || !lost[i-1] {
				bursts++
			}
		}
	}
	return float64(losses) / float64(len(lost)), float64(losses) / float64(max(bursts, 1))
}

func TestGilbertElliott(t *testing.T) {
	const n = 500_000
	tests := []struct {
		name string
		ge   GilbertElliott
	}{
		{"simple Gilbert: lose everything in bad, nothing in good", GilbertElliott{P: 0.01, R: 0.1, LossBad: 1}},
		{"Gilbert-Elliott: lossy in both states", GilbertElliott{P: 0.05, R: 0.2, LossBad: 0.5, LossGood: 0.02}},
		{"short bad periods", GilbertElliott{P: 0.002, R: 0.5, LossBad: 0.9, LossGood: 0.001}},
	}
	for _, tt := range tests {
		g := tt.ge
		want := g.P/(g.P+g.R)*g.LossBad + g.R/(g.P+g.R)*g.LossGood
		t.Run(tt.name+": mean loss matches the stationary formula within 5%", func(t *testing.T) {
			rate, _ := lossStats(offerMany(Params{GE: &g, Seed: 21}, n))
			if math.Abs(rate-want) > 0.05*want {
				t.Errorf("loss rate %.5f, want %.5f ± 5%%", rate, want)
			}
		})
	}
	t.Run("losses are bursty: mean burst length is 1/R when LossBad=1 and LossGood=0", func(t *testing.T) {
		for _, r := range []float64{0.1, 0.25, 0.5} {
			g := GilbertElliott{P: 0.01, R: r, LossBad: 1}
			rate, burst := lossStats(offerMany(Params{GE: &g, Seed: 22}, n))
			if want := 1 / r; math.Abs(burst-want) > 0.05*want {
				t.Errorf("R = %g: mean burst %.2f packets, want %.2f ± 5%%", r, burst, want)
			}
			// Independent loss of the same rate has bursts of about 1/(1-rate).
			if _, iid := lossStats(offerMany(Params{Loss: rate, Seed: 23}, n)); burst < 1.5*iid {
				t.Errorf("R = %g: bursts of %.2f packets are not longer than independent loss's %.2f", r, burst, iid)
			}
		}
	})
	t.Run("with both Loss and GE a packet is lost if either says so", func(t *testing.T) {
		g := GilbertElliott{P: 0.01, R: 0.1, LossBad: 1}
		ge := g.P / (g.P + g.R)
		want := 1 - (1-0.1)*(1-ge)
		rate, _ := lossStats(offerMany(Params{Loss: 0.1, GE: &g, Seed: 24}, n))
		if math.Abs(rate-want) > 0.03*want {
			t.Errorf("loss rate %.5f, want %.5f ± 3%%", rate, want)
		}
	})
	t.Run("the loss probability is the one of the state the packet finds, as in netem", func(t *testing.T) {
		// P = 1, R = 1: the state alternates good, bad, good, bad... With
		// LossBad = 1 and LossGood = 0, exactly every second packet is lost,
		// starting with the second (the first finds the good state).
		g := GilbertElliott{P: 1, R: 1, LossBad: 1}
		for i, l := range offerMany(Params{GE: &g}, 1000) {
			if l != (i%2 == 1) {
				t.Fatalf("packet %d lost = %v", i, l)
			}
		}
	})
	t.Run("the state survives a runtime change and restarts good when GE is turned on again", func(t *testing.T) {
		g := GilbertElliott{P: 1, R: 0, LossBad: 1} // good, then bad forever
		d := NewDirection(Params{GE: &g})
		want := []Verdict{Deliver, DropLoss, DropLoss}
		for i, w := range want {
			if _, v := d.Offer(0, 100); v != w {
				t.Fatalf("packet %d: %v, want %v", i, v, w)
			}
		}
		g2 := g
		d.SetParams(0, Params{GE: &g2}) // same model: still bad
		if _, v := d.Offer(0, 100); v != DropLoss {
			t.Fatalf("after SetParams with the same model: %v, want drop-loss", v)
		}
		d.SetParams(0, Params{})
		d.SetParams(0, Params{GE: &g2}) // off and on again: starts good
		if _, v := d.Offer(0, 100); v != Deliver {
			t.Fatalf("after turning GE off and on: %v, want deliver", v)
		}
	})
}
