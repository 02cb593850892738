// Package stats summarises measurements: percentiles from histograms,
// confidence intervals over repetitions and how many a target needs
// (Jain), steady-state checks of a series, and comparisons of means.
package stats

import "github.com/HdrHistogram/hdrhistogram-go"

// Percentiles summarise a latency distribution in milliseconds.
type Percentiles struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

// NewLatencyHist makes a histogram of microseconds from 1 µs to 1 hour
// with 3 significant digits (0.1 % resolution).
func NewLatencyHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, 3600e6, 3)
}

// FromMicros summarises a histogram of microseconds in milliseconds.
func FromMicros(h *hdrhistogram.Histogram) Percentiles {
	if h == nil || h.TotalCount() == 0 {
		return Percentiles{}
	}
	ms := func(v int64) float64 { return float64(v) / 1e3 }
	return Percentiles{
		Count: h.TotalCount(),
		Mean:  h.Mean() / 1e3,
		P50:   ms(h.ValueAtQuantile(50)),
		P90:   ms(h.ValueAtQuantile(90)),
		P95:   ms(h.ValueAtQuantile(95)),
		P99:   ms(h.ValueAtQuantile(99)),
		P999:  ms(h.ValueAtQuantile(99.9)),
		Max:   ms(h.Max()),
	}
}
