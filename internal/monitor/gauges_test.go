package monitor

import (
	"testing"
	"time"

	"replab/internal/engine"
)

func TestSummarizeGauges(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	heap := func(v float64) engine.Gauge { return engine.Gauge{Node: "n1", Name: "heap_used_bytes", Value: v} }
	gc := func(v float64) engine.Gauge {
		return engine.Gauge{Node: "n1", Name: "gc_time_ms", Value: v, Counter: true}
	}
	for _, c := range []struct {
		name       string
		pts        []gaugePoint
		heapMax    float64
		gcIncrease float64
	}{
		{"before, inside and after the phase", []gaugePoint{
			{at(0), []engine.Gauge{heap(500), gc(10)}}, // before: the counter's base
			{at(2), []engine.Gauge{heap(100), gc(15)}},
			{at(3), []engine.Gauge{heap(300), gc(40)}},
			{at(9), []engine.Gauge{heap(900), gc(90)}}, // after
		}, 300, 30},
		{"a restart resets the counter", []gaugePoint{
			{at(1), []engine.Gauge{heap(100), gc(50)}},
			{at(2), []engine.Gauge{heap(100), gc(70)}},
			{at(3), []engine.Gauge{heap(200), gc(5)}}, // restarted: 5 ms since
			{at(4), []engine.Gauge{heap(150), gc(8)}},
		}, 200, 28},
		{"first seen inside the phase", []gaugePoint{
			{at(2), []engine.Gauge{heap(100), gc(50)}},
			{at(3), []engine.Gauge{heap(100), gc(58)}},
		}, 100, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := summarizeGauges(c.pts, at(1), at(5))
			h, g := got["n1"]["heap_used_bytes"], got["n1"]["gc_time_ms"]
			if h.Max != c.heapMax || h.Increase != nil {
				t.Errorf("heap %+v, want max %g and no increase", h, c.heapMax)
			}
			if g.Increase == nil || *g.Increase != c.gcIncrease {
				t.Errorf("gc %s, want +%g", g, c.gcIncrease)
			}
		})
	}
	if got := summarizeGauges(nil, at(1), at(5)); got != nil {
		t.Errorf("no samples: %v", got)
	}
}
