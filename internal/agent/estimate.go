package agent

import "time"

// The clock offset between the driver's host and an agent's, estimated
// NTP-style: the client sends t1 (its clock), the agent stamps t2 when the
// ping arrives and t3 when the answer leaves (its clock), the client
// reads t4 when the answer arrives. With δ = (t4 − t1) − (t3 − t2) the
// time on the wire both ways, the offset θ = ((t2 − t1) + (t3 − t4)) / 2
// is the agent's clock minus the client's, off by at most δ/2 whatever
// the split between the two directions. The sample with the smallest δ
// in a window gives the tightest bound (a ping queued behind
// observations, or delayed by a busy host, has a large δ and is not
// used); its bound grows with its age by DriftPPM, for clocks that run at
// slightly different rates.

// DriftPPM is the rate difference allowed between two hosts' clocks
// (crystal oscillators are within ±50 ppm of nominal; two of them at most
// 100 ppm apart).
const DriftPPM = 100

// window is how long a sample is kept.
const window = 30 * time.Second

// sample is one ping's result, t4 on the client's clock.
type sample struct {
	theta, delta, at int64
}

// estimator keeps the samples of one connection; its user serialises
// access.
type estimator struct {
	samples []sample
}

// add records a ping: t1, t4 on the client's clock, t2, t3 on the agent's.
func (e *estimator) add(t1, t2, t3, t4 int64) {
	d := (t4 - t1) - (t3 - t2)
	if d < 0 {
		d = 0 // the agent's own time exceeded the round trip: clocks stepped
	}
	e.samples = append(e.samples, sample{theta: ((t2 - t1) + (t3 - t4)) / 2, delta: d, at: t4})
	for len(e.samples) > 0 && t4-e.samples[0].at > int64(window) {
		e.samples = e.samples[1:]
	}
}

// estimate returns the offset (agent − client) and its bound at client
// time now, from the sample whose bound is tightest then; ok is false
// before any sample.
func (e *estimator) estimate(now int64) (offset, bound int64, ok bool) {
	for _, s := range e.samples {
		b := s.delta/2 + max(now-s.at, 0)*DriftPPM/1_000_000
		if !ok || b < bound {
			offset, bound, ok = s.theta, b, true
		}
	}
	return offset, bound, ok
}
