package main

import (
	"context"
	"fmt"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/netcheck"
)

// Goodput against the configured rate: TCP cubic, 10 ms each way, the
// default 1-BDP queue.
var goodputRates = []int{1, 10, 100} // Mbit/s

const (
	goodputWarmup = 2 * time.Second
	goodputWindow = 8 * time.Second
	// idealGoodputRatio is TCP payload over wire bytes for full 1500-byte
	// packets with timestamps: 1448/1500.
	idealGoodputRatio = 1448.0 / 1500
	goodputTarget     = 0.95
)

func (b *bench) goodput(ctx context.Context, mbit int) error {
	l, err := upLab(ctx, fmt.Sprintf("bench-gp-%dmbit", mbit), fmt.Sprintf(`
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
delay = "10ms"
rate = "%dmbit"
`, mbit))
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
	res, err := netcheck.Throughput(ctx, a, srv.Addr(), netcheck.Upload, goodputWarmup, goodputWindow)
	if err != nil {
		return err
	}
	after := snapshot(l.Emulator())
	rate := float64(mbit) * 1e6
	ratio := res.GoodputBps / rate
	d := delta(before, after, "a->b")
	b.r.Add(Figure{
		Name:  fmt.Sprintf("goodput_ratio_%dmbit", mbit),
		Value: benchkit.Round(ratio, 4),
		Configured: map[string]any{"rate_mbit": mbit, "one_way_delay_ms": 10, "queue": "1 BDP (default)",
			"congestion": "cubic", "warmup_s": goodputWarmup.Seconds(), "duration_s": goodputWindow.Seconds()},
		Expected: benchkit.Ptr(benchkit.Round(idealGoodputRatio, 4)),
		Target:   ">= 0.95 (ideal 0.965: 1448 payload bytes per 1500-byte packet)", TargetMin: benchkit.Ptr(goodputTarget),
		Note: "netcheck.Throughput goodput at the receiver over the window, divided by the configured rate",
		Details: map[string]any{
			"goodput_mbps": benchkit.Round(res.GoodputBps/1e6, 3), "retransmits": res.Retransmits,
			"kernel_srtt_ms": res.KernelRTTMs, "kernel_min_rtt_ms": res.KernelMinRTTMs,
			"emulator_a_to_b": d,
		},
	})
	logf("      %.3f Mbit/s = %.4f of the rate (ideal %.4f); %d retransmits, %d queue drops, srtt %.1f ms",
		res.GoodputBps/1e6, ratio, idealGoodputRatio, res.Retransmits, d.DroppedQueuePackets, res.KernelRTTMs)
	return nil
}
