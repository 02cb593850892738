package runner

import (
	"fmt"

	"replab/internal/livemetrics"
	"replab/internal/spec"
)

// startMetrics serves live metrics for the whole run when the options or
// [run] metrics ask for it, before anything is built: a port in use is an
// error before a lab exists. The function returned stops serving.
func startMetrics(s *spec.Spec, opt *Options) (func(), error) {
	addr := opt.Metrics
	if addr == "" {
		addr = s.Run.Metrics
	}
	if addr == "" {
		return func() {}, nil
	}
	m := livemetrics.New()
	bound, err := m.Serve(addr)
	if err != nil {
		return nil, err
	}
	opt.live = m
	if opt.Log != nil {
		fmt.Fprintf(opt.Log, "metrics: http://%s/metrics (Prometheus and OpenMetrics text)\n", bound)
	}
	if opt.MetricsReady != nil {
		opt.MetricsReady(bound)
	}
	return func() { _ = m.Close() }, nil
}

// metricsLinks points the live metrics at the lab's link counters.
func (r *run) metricsLinks() {
	if r.opt.live == nil || r.lab == nil || r.lab.Emulator() == nil {
		return
	}
	em := r.lab.Emulator()
	r.opt.live.Links(func() []livemetrics.Link {
		var out []livemetrics.Link
		for _, d := range em.Stats() {
			c := d.Counters
			out = append(out, livemetrics.Link{Direction: d.From + "->" + d.To, DeliveredBytes: c.DeliveredBytes,
				DroppedPackets: c.DroppedQueuePackets + c.DroppedLossPackets + c.DroppedOtherPackets, QueueBytes: c.QueueBytes})
		}
		return out
	})
}
