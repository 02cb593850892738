package main

import (
	"context"
	"math"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/netcheck"
)

// TCP reno at 1 % random loss and 50 ms RTT, against the Mathis formula
// rate ≈ MSS/RTT · C/√p with C = √(3/2).
const (
	renoWarmup   = 3 * time.Second
	renoWindow   = 10 * time.Second
	renoLoss     = 0.01
	renoRTT      = 0.050 // s
	mssBytes     = 1448
	mathisConstC = 1.2247448713915890 // √(3/2)
)

func (b *bench) reno(ctx context.Context) error {
	l, err := upLab(ctx, "bench-reno", `
[site.a]
tcp_congestion = "reno"
[site.b]
tcp_congestion = "reno"
[[link]]
sites = ["a", "b"]
delay = "25ms"
rate = "100mbit"
[link.forward]
loss = "1%"
`)
	if err != nil {
		return err
	}
	defer closeLab(l)
	a, bb := l.Site("a"), l.Site("b")
	srv, err := netcheck.StartServer(ctx, bb, bb.Address)
	if err != nil {
		return err
	}
	defer srv.Close()
	before := snapshot(l.Emulator())
	res, err := netcheck.Throughput(ctx, a, srv.Addr(), netcheck.Upload, renoWarmup, renoWindow)
	if err != nil {
		return err
	}
	d := delta(before, snapshot(l.Emulator()), "a->b")
	mathis := mssBytes * 8 / renoRTT * mathisConstC / math.Sqrt(renoLoss)
	cfg := map[string]any{"congestion": "reno", "loss": "1% (a->b, the data direction)", "rtt_ms": 50, "rate": "100mbit",
		"warmup_s": renoWarmup.Seconds(), "duration_s": renoWindow.Seconds()}
	got := res.GoodputBps
	b.r.Add(Figure{Name: "reno_goodput_mbps", Value: benchkit.Round(got/1e6, 3), Configured: cfg,
		Note: "netcheck.Throughput goodput at the receiver",
		Details: map[string]any{"retransmits": res.Retransmits, "kernel_srtt_ms": res.KernelRTTMs,
			"kernel_min_rtt_ms": res.KernelMinRTTMs, "emulator_a_to_b": d}})
	b.r.Add(Figure{Name: "mathis_mbps", Value: benchkit.Round(mathis/1e6, 3), Configured: cfg,
		Note: "MSS/RTT · C/√p with MSS 1448 bytes, RTT 50 ms, C = √(3/2), p = 0.01"})
	b.r.Add(Figure{Name: "reno_to_mathis_ratio", Value: benchkit.Round(got/mathis, 3), Configured: cfg,
		Note: "measured over predicted; Mathis is an approximation (no timeouts, periodic loss), so ~0.7–1.3 is normal"})
	logf("      reno %.3f Mbit/s, Mathis %.3f Mbit/s, ratio %.3f; %d retransmits, srtt %.1f ms",
		got/1e6, mathis/1e6, got/mathis, res.Retransmits, res.KernelRTTMs)
	return nil
}
