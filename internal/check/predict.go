package check

import (
	"math"
	"slices"
)

// The prediction (issue 32): from a replica's lag distribution alone, the
// share of reads there that should be stale. A read is stale when the
// key's last write acknowledged before it was not yet visible at the
// replica when it read: when that write's lag L exceeded the gap between
// its COMMIT being sent (where the lag probe starts counting) and the
// read. Taking each write's lag as a draw from the replica's distribution,
// the expected number of stale reads is the sum over reads of P(L > gap),
// and the expected share that sum over the reads. Reads of a key nothing
// was written to before are never stale and count as 0.

// LagDist is a replica's distribution of lags (the lag probe's).
type LagDist interface {
	// Exceeds is the share of lags greater than ns.
	Exceeds(ns int64) float64
	// Quantile is the lag at quantile q (0 … 1), in ns.
	Quantile(q float64) int64
	// Samples is how many lags the distribution holds.
	Samples() int64
}

// Weighted is a LagDist of values with counts: an HdrHistogram's
// buckets, or plain samples (counts of 1).
type Weighted struct {
	vals  []int64 // sorted, distinct
	above []int64 // above[i]: how many values are greater than vals[i]
	total int64
}

// NewWeighted makes a distribution of values[i] seen counts[i] times (nil
// counts: once each). Values need not be sorted or distinct.
func NewWeighted(values, counts []int64) *Weighted {
	type vc struct{ v, c int64 }
	vs := make([]vc, 0, len(values))
	for i, v := range values {
		c := int64(1)
		if counts != nil {
			c = counts[i]
		}
		if c > 0 {
			vs = append(vs, vc{v, c})
		}
	}
	slices.SortFunc(vs, func(a, b vc) int { return cmpInt64(a.v, b.v) })
	d := &Weighted{}
	for _, x := range vs {
		if n := len(d.vals); n > 0 && d.vals[n-1] == x.v {
			d.above[n-1] += x.c // counts of this value, for now
			d.total += x.c
			continue
		}
		d.vals = append(d.vals, x.v)
		d.above = append(d.above, x.c)
		d.total += x.c
	}
	var after int64
	for i := len(d.vals) - 1; i >= 0; i-- {
		c := d.above[i]
		d.above[i] = after
		after += c
	}
	return d
}

// Samples implements LagDist.
func (d *Weighted) Samples() int64 { return d.total }

// Exceeds implements LagDist.
func (d *Weighted) Exceeds(ns int64) float64 {
	if d.total == 0 {
		return 0
	}
	i := sortSearch(len(d.vals), func(i int) bool { return d.vals[i] > ns })
	if i == 0 {
		return 1
	}
	return float64(d.above[i-1]) / float64(d.total)
}

// Quantile implements LagDist: the smallest value with at least q of the
// values at or below it.
func (d *Weighted) Quantile(q float64) int64 {
	if d.total == 0 {
		return 0
	}
	need := int64(math.Ceil(q * float64(d.total)))
	i := sortSearch(len(d.vals), func(i int) bool { return d.total-d.above[i] >= need })
	return d.vals[min(i, len(d.vals)-1)]
}

// Prediction is what a replica's lag predicts of the reads there, beside
// what they measured.
type Prediction struct {
	// Share: the mean over the node's reads of P(lag > gap), the gap from
	// the COMMIT sent of the key's last write acknowledged before the read
	// to the read's invocation — the lag's own origin (the gap from the
	// acknowledgement where the history has no commit_ns). Stale is
	// Share × reads.
	Share float64 `json:"share"`
	Stale float64 `json:"stale"`
	// ShareFromAck: the same with the gap from the write's
	// acknowledgement, the wording: it counts the COMMIT's own
	// return trip as lag still to come, so it predicts more.
	ShareFromAck float64 `json:"share_from_ack"`
	// MeasuredShare is the node's stale share, repeated here;
	// RelativeDiff is (measured − predicted) / predicted (0 when both are
	// 0). Tolerance is the larger of 10 % of the prediction and 1.96
	// standard deviations of the stale count the prediction expects
	// (independent reads: Σ p(1−p)), as a share; Agree says whether the
	// measured share is within it.
	MeasuredShare float64 `json:"measured_share"`
	RelativeDiff  float64 `json:"relative_diff"`
	Tolerance     float64 `json:"tolerance"`
	Agree         bool    `json:"agree"`
	// LagSamples: lags in the distribution; GapsFromCommit: reads whose
	// gap was taken from a COMMIT sent (the others from the ack).
	LagSamples     int64 `json:"lag_samples"`
	GapsFromCommit int64 `json:"gaps_from_commit"`
	// SafeWindowMs: the smallest delay after a write's acknowledgement
	// after which at least SafeShare of reads see it, as the lag predicts
	// it: P(lag > delay + the write's COMMIT-to-ack time) ≤ 1 − SafeShare,
	// averaged over the run's writes that reads followed. LagP999Ms is the
	// lag's 99.9th percentile (from COMMIT sent), for comparison.
	SafeWindowMs float64 `json:"safe_window_ms"`
	SafeShare    float64 `json:"safe_share"`
	LagP999Ms    float64 `json:"lag_p99_9_ms"`
	// LagBiasMs was taken off every lag first: how far the probe's lags
	// lie above the truth on average (StaleOptions.LagBias).
	LagBiasMs float64 `json:"lag_bias_ms"`
	// ShareLow and ShareHigh bound the prediction by what the probe
	// knows of each lag: taken LagSlackMs less (an interval and a poll at
	// their worst: the truth is no lower) and as measured (the truth is no
	// higher). InBand says whether the measured share lies in the band
	// widened by the tolerance; Agree is true then too.
	ShareLow   float64 `json:"share_low"`
	ShareHigh  float64 `json:"share_high"`
	LagSlackMs float64 `json:"lag_slack_ms"`
	InBand     bool    `json:"in_band"`
}

// band fills ShareLow, ShareHigh and InBand from the lags as measured
// (lag) and less slack.
func (p *Prediction) band(lag LagDist, slack int64, gaps []int64, reads, stale int64) {
	if reads <= 0 {
		return
	}
	low := Shifted(lag, slack)
	var lo, hi float64
	for _, g := range gaps {
		lo += low.Exceeds(g)
		hi += lag.Exceeds(g)
	}
	n := float64(reads)
	p.ShareLow, p.ShareHigh, p.LagSlackMs = round6(lo/n), round6(hi/n), msOf(slack)
	m := float64(stale) / n
	p.InBand = m >= p.ShareLow-p.Tolerance && m <= p.ShareHigh+p.Tolerance
	p.Agree = p.Agree || p.InBand
}

// Shifted is d with every value less bias (ns); d itself when bias is 0.
func Shifted(d LagDist, bias int64) LagDist {
	if bias == 0 {
		return d
	}
	return shifted{d, bias}
}

type shifted struct {
	d    LagDist
	bias int64
}

func (s shifted) Exceeds(ns int64) float64 { return s.d.Exceeds(ns + s.bias) }
func (s shifted) Quantile(q float64) int64 { return max(s.d.Quantile(q)-s.bias, 0) }
func (s shifted) Samples() int64           { return s.d.Samples() }

// AgreeRelative is the relative difference within which measured and
// predicted agree whatever the counts.
const AgreeRelative = 0.10

// Predict is the prediction for a node's reads (of which stale were
// measured stale): gapsCommit and gapsAck hold, for each read after a
// write, the gap from its key's last write's COMMIT sent and from its
// acknowledgement; offsets that write's acknowledgement minus its COMMIT
// sent. The other reads (reads − len(gaps)) count as never stale.
func Predict(lag LagDist, gapsCommit, gapsAck, offsets []int64, reads, stale int64, safe float64) *Prediction {
	p := &Prediction{LagSamples: lag.Samples(), SafeShare: safe}
	if reads <= 0 {
		return p
	}
	var sum, sumAck, variance float64
	for i, g := range gapsCommit {
		e := lag.Exceeds(g)
		sum += e
		variance += e * (1 - e)
		sumAck += lag.Exceeds(gapsAck[i])
	}
	n := float64(reads)
	p.Share = round6(sum / n)
	p.Stale = round3(sum)
	p.ShareFromAck = round6(sumAck / n)
	p.MeasuredShare = round6(float64(stale) / n)
	if sum > 0 {
		p.RelativeDiff = round6((float64(stale) - sum) / sum)
	} else if stale > 0 {
		p.RelativeDiff = math.Inf(1)
	}
	p.Tolerance = round6(max(AgreeRelative*sum, 1.96*math.Sqrt(variance)) / n)
	p.Agree = math.Abs(float64(stale)-sum)/n <= p.Tolerance || (stale == 0 && sum == 0)
	if math.IsInf(p.RelativeDiff, 0) {
		p.RelativeDiff = 0 // JSON has no infinity; Agree is false
	}
	p.SafeWindowMs = msOf(SafeWindow(lag, offsets, safe))
	p.LagP999Ms = msOf(lag.Quantile(0.999))
	return p
}

// SafeWindow is the smallest delay d ≥ 0 (ns, to 1 µs) after a write's
// acknowledgement after which a read sees it with probability at least
// safe, averaged over writes whose acknowledgement came offsets[i] after
// their COMMIT was sent: the mean of P(lag > d + offsets[i]) ≤ 1 − safe.
// No offsets: one write acknowledged as its COMMIT was sent.
func SafeWindow(lag LagDist, offsets []int64, safe float64) int64 {
	if len(offsets) == 0 {
		offsets = []int64{0}
	}
	miss := func(d int64) float64 {
		var s float64
		for _, o := range offsets {
			s += lag.Exceeds(d + o)
		}
		return s / float64(len(offsets))
	}
	limit := 1 - safe + 1e-12
	if miss(0) <= limit {
		return 0
	}
	lo, hi := int64(0), max(lag.Quantile(1), 1) // miss(hi) = 0
	for hi-lo > 1_000 {
		mid := lo + (hi-lo)/2
		if miss(mid) <= limit {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }
