// Package livemetrics serves a run's figures while it runs, in the
// Prometheus and OpenMetrics text formats, through the Prometheus client
// library: transactions and errors by type, commit latency and lag
// histograms, the lab's links, faults and the phase. The names are in
// docs/metrics.md ("Live metrics").
package livemetrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Phases a run goes through, for replab_phase.
var Phases = []string{"setup", "warmup", "measure", "cooldown", "catch-up", "done"}

// Link is one link direction's counters at a scrape.
type Link struct {
	Direction      string // "a->b"
	DeliveredBytes uint64
	DroppedPackets uint64
	QueueBytes     int64
}

// Metrics is one replab run's live figures. Its methods are safe for
// concurrent use; a nil *Metrics does nothing, so callers need no checks.
type Metrics struct {
	reg      *prometheus.Registry
	tx       *prometheus.CounterVec
	errs     *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	lag      *prometheus.HistogramVec
	lagLast  *prometheus.GaugeVec
	faults   *prometheus.CounterVec
	phase    *prometheus.GaugeVec
	info     *prometheus.GaugeVec
	measured prometheus.Counter

	mu    sync.Mutex
	links func() []Link // nil outside a lab

	srv *http.Server
	ln  net.Listener
}

// Latency buckets in seconds: 0.25 ms to 64 s, doubling — a LAN commit to
// a satellite link's slow start.
var latencyBuckets = prometheus.ExponentialBuckets(0.00025, 2, 19)

// New makes the metrics, registered on a registry of their own.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.tx = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replab_transactions_total",
		Help: "Transactions committed, every phase, by transaction type."}, []string{"type"})
	m.errs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replab_errors_total",
		Help: "Transactions failed after their retries, by type and error code (SQLSTATE, timeout, connection, ...)."}, []string{"type", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "replab_commit_latency_seconds",
		Help: "Commit latency by transaction type: from BEGIN (open loop: the intended start) to the COMMIT's return.", Buckets: latencyBuckets}, []string{"type"})
	m.lag = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "replab_lag_seconds",
		Help: "Replication lag per replica: from COMMIT sent until visible there, measured transactions.", Buckets: latencyBuckets}, []string{"replica"})
	m.lagLast = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "replab_lag_last_seconds",
		Help: "The latest lag recorded at each replica."}, []string{"replica"})
	m.faults = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replab_faults_total",
		Help: "Faults applied and healed, by action (apply, heal) and kind (link, node)."}, []string{"action", "kind"})
	m.phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "replab_phase",
		Help: "1 for the phase the run is in, 0 for the others."}, []string{"phase"})
	m.info = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "replab_run_info",
		Help: "The run: lab (or target) name, engine and workload; always 1."}, []string{"lab", "engine", "workload"})
	m.measured = prometheus.NewCounter(prometheus.CounterOpts{Name: "replab_measurements_total",
		Help: "Measurements started (repetitions, sweep points)."})
	m.reg.MustRegister(m.tx, m.errs, m.latency, m.lag, m.lagLast, m.faults, m.phase, m.info, m.measured, linkCollector{m})
	for _, p := range Phases {
		m.phase.WithLabelValues(p).Set(0)
	}
	return m
}

// Serve listens on addr ("host:port"; port 0 picks one) and serves
// /metrics until Close. It returns the address it listens on.
func (m *Metrics) Serve(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	m.ln, m.srv = ln, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return ln.Addr().String(), nil
}

// Close stops serving and frees the port.
func (m *Metrics) Close() error {
	if m == nil || m.srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = m.srv.Close()
	}
	return err
}

// Registry is the metrics' registry (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Run says what is measured.
func (m *Metrics) Run(lab, engine, workload string) {
	if m == nil {
		return
	}
	m.info.Reset()
	m.info.WithLabelValues(lab, engine, workload).Set(1)
	m.measured.Inc()
}

// Phase sets the current phase (one of Phases).
func (m *Metrics) Phase(p string) {
	if m == nil {
		return
	}
	for _, q := range Phases {
		v := 0.0
		if q == p {
			v = 1
		}
		m.phase.WithLabelValues(q).Set(v)
	}
}

// Committed implements driver.Observer.
func (m *Metrics) Committed(txType string, latencyNs int64) {
	if m == nil {
		return
	}
	m.tx.WithLabelValues(txType).Inc()
	m.latency.WithLabelValues(txType).Observe(float64(latencyNs) / 1e9)
}

// Failed implements driver.Observer.
func (m *Metrics) Failed(txType, code string) {
	if m == nil {
		return
	}
	m.errs.WithLabelValues(txType, code).Inc()
}

// Lag records one lag at a replica.
func (m *Metrics) Lag(replica string, lagNs int64) {
	if m == nil {
		return
	}
	s := float64(lagNs) / 1e9
	m.lag.WithLabelValues(replica).Observe(s)
	m.lagLast.WithLabelValues(replica).Set(s)
}

// Fault counts a fault applied or healed ("apply", "heal"; kind "link"
// or "node").
func (m *Metrics) Fault(action, kind string) {
	if m == nil {
		return
	}
	m.faults.WithLabelValues(action, kind).Inc()
}

// Links sets where the link counters come from at each scrape (nil: no
// lab, no link metrics).
func (m *Metrics) Links(f func() []Link) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.links = f
	m.mu.Unlock()
}

// linkCollector reads the lab's counters when scraped: they are the
// emulator's own cumulative counters, not copies.
type linkCollector struct{ m *Metrics }

var (
	linkBytesDesc = prometheus.NewDesc("replab_link_delivered_bytes_total", "Bytes a link direction delivered, since the lab started.", []string{"direction"}, nil)
	linkDropDesc  = prometheus.NewDesc("replab_link_dropped_packets_total", "Packets a link direction dropped (queue full, loss, down), since the lab started.", []string{"direction"}, nil)
	linkQueueDesc = prometheus.NewDesc("replab_link_queue_bytes", "Bytes waiting in a link direction's queue.", []string{"direction"}, nil)
)

func (c linkCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- linkBytesDesc
	ch <- linkDropDesc
	ch <- linkQueueDesc
}

func (c linkCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	f := c.m.links
	c.m.mu.Unlock()
	if f == nil {
		return
	}
	for _, l := range f() {
		ch <- prometheus.MustNewConstMetric(linkBytesDesc, prometheus.CounterValue, float64(l.DeliveredBytes), l.Direction)
		ch <- prometheus.MustNewConstMetric(linkDropDesc, prometheus.CounterValue, float64(l.DroppedPackets), l.Direction)
		ch <- prometheus.MustNewConstMetric(linkQueueDesc, prometheus.GaugeValue, float64(l.QueueBytes), l.Direction)
	}
}

// OnLag is Lag as a lag probe's hook; nil for a nil *Metrics, so that the
// probe pays nothing.
func (m *Metrics) OnLag() func(replica string, lagNs int64) {
	if m == nil {
		return nil
	}
	return m.Lag
}
