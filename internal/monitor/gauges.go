package monitor

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"replab/internal/engine"
)

// Gauges are an engine's own figures (engine.Gauger), sampled with the
// replication state.

// GaugesFile is the gauges' CSV in the results directory.
const (
	GaugesFile   = "gauges.csv"
	GaugesHeader = "t_s,node,name,value"
)

// GaugeSummary is one gauge over the measure phase.
type GaugeSummary struct {
	Max float64 `json:"max"`
	// Increase is a counter's growth over the phase (from the last sample
	// before it to the last inside it); absent for a level.
	Increase *float64 `json:"increase,omitempty"`
}

type gaugePoint struct {
	t      time.Time
	gauges []engine.Gauge
}

// sampleGauges reads the gauges once, if the cluster has any.
func (m *Monitor) sampleGauges(ctx context.Context, t time.Time) {
	g, ok := m.cfg.Cluster.(engine.Gauger)
	if !ok {
		return
	}
	gs, err := g.Gauges(ctx)
	if err != nil {
		if m.sampleCtx.Err() == nil {
			m.fail("read gauges", err)
		}
		return
	}
	m.mu.Lock()
	m.gaugePts = append(m.gaugePts, gaugePoint{t: t, gauges: gs})
	m.mu.Unlock()
	if m.gaugesCSV != nil {
		ts := m.ts(t)
		for _, x := range gs {
			m.gaugesCSV.printf("%s,%s,%s,%s\n", ts, csvField(x.Node), csvField(x.Name), strconv.FormatFloat(x.Value, 'f', -1, 64))
		}
		m.gaugesCSV.flush()
	}
}

// summarizeGauges gives each node's gauges over [start, end]: the largest
// value sampled inside, and for a counter its increase from the last
// sample at or before start (a restart that resets a counter counts
// from zero again).
func summarizeGauges(pts []gaugePoint, start, end time.Time) map[string]map[string]GaugeSummary {
	type key struct{ node, name string }
	last := map[key]float64{}
	incr := map[key]float64{}
	out := map[string]map[string]GaugeSummary{}
	for _, p := range pts {
		if p.t.After(end) {
			break
		}
		for _, g := range p.gauges {
			k := key{g.Node, g.Name}
			if !p.t.After(start) {
				last[k] = g.Value
				continue
			}
			if out[g.Node] == nil {
				out[g.Node] = map[string]GaugeSummary{}
			}
			gs, seen := out[g.Node][g.Name]
			if !seen || g.Value > gs.Max {
				gs.Max = g.Value
			}
			if g.Counter {
				prev, had := last[k]
				if !had {
					prev = g.Value // first seen inside: nothing to add yet
				}
				if g.Value >= prev {
					incr[k] += g.Value - prev
				} else {
					incr[k] += g.Value // restarted from zero
				}
				last[k] = g.Value
				v := incr[k]
				gs.Increase = &v
			}
			out[g.Node][g.Name] = gs
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (s GaugeSummary) String() string {
	if s.Increase != nil {
		return fmt.Sprintf("max %g, +%g", s.Max, *s.Increase)
	}
	return fmt.Sprintf("max %g", s.Max)
}
