package lagprobe

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/stats"
)

// lagStats is what a watcher keeps of one replica, by either method: the
// lags it recorded, per second too, and how its polls went. The
// watcher's mutex guards it.
type lagStats struct {
	start int64 // second 0 of the series, on the probe's clock

	lag          *hdrhistogram.Histogram // µs
	minNs, maxNs int64
	sec          *hdrhistogram.Histogram // µs, the current second
	secMaxNs     int64
	curSec       int64
	series       []SecondStats

	pollDur  *hdrhistogram.Histogram // µs
	pollGap  *hdrhistogram.Histogram // µs between chained poll starts
	gapSum   int64                   // ns, over chained polls
	gapN     int64
	polls    int64
	pollErrs int64
	pollMax  int64 // ns
	lastErr  string
	last     int64 // start of the last successful poll
}

func newLagStats(start int64) lagStats {
	return lagStats{
		start:   start,
		lag:     hdrhistogram.New(histLowUs, histHighUs, 3),
		sec:     hdrhistogram.New(histLowUs, histHighUs, 2),
		pollDur: hdrhistogram.New(histLowUs, histHighUs, 2),
		pollGap: hdrhistogram.New(histLowUs, histHighUs, 2),
		minNs:   -1,
	}
}

// countPoll counts a successful poll from start to end; chained: it followed
// the previous one by the interval (not after a pause or a failure).
func (s *lagStats) countPoll(start, end int64, chained bool) {
	if s.polls > 0 && chained {
		recordUs(s.pollGap, start-s.last)
		s.gapSum += start - s.last
		s.gapN++
	}
	s.polls++
	s.last = start
	recordUs(s.pollDur, end-start)
	s.pollMax = max(s.pollMax, end-start)
	s.roll(end)
}

func (s *lagStats) failed(err error) {
	s.pollErrs++
	s.lastErr = err.Error()
}

// add records one lag.
func (s *lagStats) add(lag int64) {
	recordUs(s.lag, lag)
	recordUs(s.sec, lag)
	if s.minNs < 0 || lag < s.minNs {
		s.minNs = lag
	}
	s.maxNs = max(s.maxNs, lag)
	s.secMaxNs = max(s.secMaxNs, lag)
}

// roll closes the seconds of Series before the one holding t.
func (s *lagStats) roll(t int64) {
	sec := max(t-s.start, 0) / int64(time.Second)
	if s.polls == 1 {
		s.curSec = sec
		return
	}
	for s.curSec < sec {
		s.series = append(s.series, s.second())
		s.sec.Reset()
		s.secMaxNs = 0
		s.curSec++
	}
}

func (s *lagStats) second() SecondStats {
	ss := SecondStats{Second: s.curSec, Count: s.sec.TotalCount()}
	if ss.Count > 0 {
		ss.P50Ms = usToMs(s.sec.ValueAtQuantile(50))
		ss.P99Ms = usToMs(s.sec.ValueAtQuantile(99))
		ss.MaxMs = nsToMs(s.secMaxNs)
	}
	return ss
}

// fill sets res's lag and poll figures.
func (s *lagStats) fill(res *Result) {
	res.Polls, res.PollErrors, res.LastError = s.polls, s.pollErrs, s.lastErr
	res.Histogram = hdrhistogram.Import(s.lag.Export())
	if n := s.lag.TotalCount(); n > 0 {
		res.LagMs = stats.FromMicros(s.lag)
		res.LagMs.Max = nsToMs(s.maxNs)
		res.LagMinMs = nsToMs(s.minNs)
	}
	if s.gapN > 0 {
		res.ResolutionMs = nsToMs(s.gapSum) / float64(s.gapN)
		res.IntervalP99Ms = usToMs(s.pollGap.ValueAtQuantile(99))
	}
	if s.polls > 0 {
		res.PollP50Ms = usToMs(s.pollDur.ValueAtQuantile(50))
		res.PollP99Ms = usToMs(s.pollDur.ValueAtQuantile(99))
		res.PollMaxMs = nsToMs(s.pollMax)
		res.Series = append(append([]SecondStats(nil), s.series...), s.second())
	}
}

// recordUs adds a duration in ns to a µs histogram, clamped to its range.
func recordUs(h *hdrhistogram.Histogram, ns int64) {
	us := min(max(ns/1000, 0), histHighUs)
	_ = h.RecordValue(us)
}
