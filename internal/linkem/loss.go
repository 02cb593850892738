package linkem

import (
	"math"
	"math/rand/v2"
)

// lossModel decides which admitted packets are lost: independent random loss
// with probability Loss, and netem's Gilbert-Elliott model ("loss gemodel")
// when GE is set. A packet is lost if either says so; both are evaluated for
// every admitted packet, so the Gilbert-Elliott chain advances once per
// admitted packet whatever the random loss decided.
//
// It draws from its own PCG stream, separate from jitter's, so changing the
// jitter does not change which packets are lost.
type lossModel struct {
	rng  rand.PCG
	p    float64        // independent loss probability
	ge   GilbertElliott // copied, so the caller may reuse its struct
	geOn bool
	bad  bool // Gilbert-Elliott state: false = good, true = bad
}

// Stream identifiers mixed into the seed, one per random stream.
const (
	lossStream   = 0x6c6f7373_6c6f7373 // "lossloss"
	jitterStream = 0x6a697474_6a697474 // "jittjitt"
)

func (l *lossModel) seed(seed int64) {
	l.rng.Seed(uint64(seed), lossStream)
}

// set takes the loss parameters of p. The Gilbert-Elliott state is kept while
// the model stays on and starts in the good state when it is turned on.
func (l *lossModel) set(p Params) {
	l.p = p.Loss
	if p.GE == nil {
		l.geOn, l.bad = false, false
		return
	}
	l.ge, l.geOn = *p.GE, true
}

// uniform returns a float64 in [0,1) from the loss stream.
func (l *lossModel) uniform() float64 {
	return float64(l.rng.Uint64()>>11) / (1 << 53)
}

// lost decides whether one admitted packet is lost.
func (l *lossModel) lost() bool {
	lost := false
	if l.p > 0 {
		lost = l.uniform() < l.p
	}
	if l.geOn && l.gilbertElliott() {
		lost = true
	}
	return lost
}

// gilbertElliott follows Linux netem's loss_gilb_ell (net/sched/sch_netem.c)
// step by step. Per packet, in the state the packet finds:
//
//	good: move to bad with probability P; then lose with probability LossGood (1-k)
//	bad:  move to good with probability R; then lose with probability LossBad (1-h)
//
// Two numbers are drawn per packet, transition first, as netem does. As in
// netem the loss probability is the one of the state the packet found (the
// branch it entered); the transition decides the state of the next packet.
// The stationary share of packets finding the bad state is P/(P+R), so the
// mean loss is P/(P+R)*LossBad + R/(P+R)*LossGood; with LossBad=1 and
// LossGood=0 the loss bursts are geometric with mean length 1/R.
func (l *lossModel) gilbertElliott() bool {
	if !l.bad {
		if l.uniform() < l.ge.P {
			l.bad = true
		}
		return l.uniform() < l.ge.LossGood
	}
	if l.uniform() < l.ge.R {
		l.bad = false
	}
	return l.uniform() < l.ge.LossBad
}

// MeanLoss is the share of admitted packets p's loss models lose in the
// long run: the independent loss and the Gilbert-Elliott chain's
// stationary mean, P/(P+R)*LossBad + R/(P+R)*LossGood, combined as
// independent draws.
func (p Params) MeanLoss() float64 {
	ge := 0.0
	if g := p.GE; g != nil && g.P+g.R > 0 {
		ge = (g.P*g.LossBad + g.R*g.LossGood) / (g.P + g.R)
	}
	return 1 - (1-p.Loss)*(1-ge)
}

// LossDesignEffect is how much the Gilbert-Elliott chain's correlation
// widens the variance of a loss count over what independent draws of
// the same mean would give: (1+λ)/(1-λ) with λ = 1-P-R the chain's
// lag-one correlation (an upper bound for the loss indicator, which is
// the state blurred by LossBad and LossGood); 1 without the chain or
// for λ ≤ 0.
func (p Params) LossDesignEffect() float64 {
	g := p.GE
	if g == nil {
		return 1
	}
	l := 1 - g.P - g.R
	if l <= 0 {
		return 1
	}
	if l >= 1 {
		return math.Inf(1)
	}
	return (1 + l) / (1 - l)
}
