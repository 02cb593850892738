package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/netcheck"
)

// The top of the range: a 10 Gbit/s link, 25 ms each way, filled by 8
// parallel cubic flows a->b, with the RTT probes of the loaded step
// running meanwhile.
const (
	tenGigRateBps        = 10_000_000_000
	tenGigStreams        = 8
	tenGigOmit           = 3 * time.Second // iperf3 -O: slow start to 10 Gbit/s at 50 ms RTT
	tenGigGoodputTarget  = 9.0             // Gbit/s
	tenGigBulkAfterProbe = 5 * time.Second // netcheck.RTT waits for late replies; iperf3 starts late on a busy machine
)

// The sites' socket buffers allow each flow several times its share of the
// BDP (62.5 MB in all), as the 1gbit step's do.
const tenGigSpec = `
[site.a]
tcp_rmem = "4096 131072 33554432"
tcp_wmem = "4096 16384 33554432"
[site.b]
tcp_rmem = "4096 131072 33554432"
tcp_wmem = "4096 16384 33554432"
[[link]]
sites = ["a", "b"]
delay = "25ms"
rate = "10gbit"
`

func tenGigConfig() map[string]any {
	return map[string]any{"rate": "10gbit", "rtt_ms": 2 * rttOneWayMs, "one_way_delay_ms": rttOneWayMs,
		"load":   fmt.Sprintf("iperf3 cubic a->b, %d streams, first %s left out, default 1-BDP queue", tenGigStreams, tenGigOmit),
		"probes": rttProbes, "probe_interval_ms": rttInterval.Milliseconds()}
}

// tenGig measures TCP goodput on a 10 Gbit/s link and the emulator's delay
// error meanwhile, the way rttLoaded does at 1 Gbit/s: the one-way delay of
// probes in the direction that carries only ACKs, doubled.
func (b *bench) tenGig(ctx context.Context) error {
	l, err := upLab(ctx, "bench-10gbit", tenGigSpec)
	if err != nil {
		return err
	}
	defer closeLab(l)
	a, bb := l.Site("a"), l.Site("b")
	e := l.Emulator()
	srv, err := netcheck.StartServer(ctx, bb, bb.Address)
	if err != nil {
		return err
	}
	defer srv.Close()

	quiet, err := benchkit.WaitQuiet(ctx, quiet)
	if err != nil {
		return err
	}
	probeTime := time.Duration(rttProbes)*rttInterval + owdTail
	warmup := time.Second // after the omitted seconds
	bulkSeconds := int((warmup + probeTime + tenGigBulkAfterProbe).Seconds())
	bulkCtx, stopBulk := context.WithCancel(ctx)
	var bulk iperfResult
	var bulkErr error
	bulkDone := make(chan struct{})
	begin := snapshot(e)
	go func() {
		defer close(bulkDone)
		bulk, bulkErr = iperfWith(bulkCtx, bb, bb.Address, a, bulkSeconds,
			"-P", strconv.Itoa(tenGigStreams), "-O", strconv.Itoa(int(tenGigOmit.Seconds())))
	}()
	defer func() {
		stopBulk()
		<-bulkDone
	}()
	if err := benchkit.Sleep(ctx, tenGigOmit+warmup); err != nil {
		return err
	}
	var tap probeTap
	defer tap.install(e)()
	before := snapshot(e)
	lateness(e)
	meter := startCPU()
	p := runProbes(ctx, a, bb, a.Address, bb.Address, srv, rttProbes, &tap)
	cpu := meter.Read()
	late := lateness(e)
	after := snapshot(e)
	endedEarly := false
	select {
	case <-bulkDone:
		endedEarly = true
	default:
		<-bulkDone
	}
	end := snapshot(e)
	if bulkErr != nil {
		return fmt.Errorf("bulk flows: %w", bulkErr)
	}
	if endedEarly {
		return fmt.Errorf("the bulk flows (%d s) ended before the probes did", bulkSeconds)
	}
	if err := p.err(); err != nil {
		return err
	}

	owdConfigured := rttOneWayMs + serializationMs(owdPacketBytes, tenGigRateBps)
	ack := errorStats(p.owdBA.SamplesMs, owdConfigured)
	rttEquiv := ack.scaled(2)
	same := errorStats(p.rtt.SamplesMs, 2*rttOneWayMs+2*serializationMs(rttEchoBytes, tenGigRateBps))
	split := breakdown(p.owdBA.Probes, owdConfigured)
	cfg := tenGigConfig()
	gbps := bulk.ReceivedBps / 1e9
	whole := delta(begin, end, "a->b")
	b.r.Add(Figure{Name: "goodput_10gbit_gbps", Value: benchkit.Round(gbps, 3), Configured: cfg,
		Expected: benchkit.Ptr(benchkit.Round(10*idealGoodputRatio, 3)),
		Target:   ">= 9 Gbit/s", TargetMin: benchkit.Ptr(tenGigGoodputTarget),
		Note: "iperf3 goodput at the receiver, all streams, after the omitted seconds (ideal 9.65: 1448 payload bytes per 1500-byte packet)",
		Details: map[string]any{"iperf3": bulk, "emulator_a_to_b_whole_run": whole,
			"emulator_b_to_a_whole_run": delta(begin, end, "b->a"), "cpu_during_probes": cpu, "wait_for_quiet_machine": quiet}})
	method := "2 × (one-way delay − 25 ms) of probes b->a, the direction carrying only the bulk flows' ACKs, while the flows fill the link"
	b.r.Add(Figure{Name: "rtt_10gbit_error_mean_ms", Value: rttEquiv.MeanMs, Configured: cfg,
		Note: method, Details: map[string]any{"round_trip_equivalent_error": rttEquiv, "one_way_b_to_a_breakdown": split,
			"emulator_lateness_during_probes": late, "data_direction_during_probes": delta(before, after, "a->b"),
			"ack_direction_during_probes":        delta(before, after, "b->a"),
			"round_trip_through_the_queue_error": same, "one_way_received": len(p.owdBA.SamplesMs), "one_way_sent": p.owdBA.Sent}})
	b.r.Add(Figure{Name: "rtt_10gbit_error_p99_ms", Value: rttEquiv.P99Ms, Configured: cfg,
		Target: "<= 1 ms", TargetMax: benchkit.Ptr(rttP99Target), Note: method})
	logf("      %d streams: %.2f Gbit/s (%d retransmits after the omitted seconds, %d queue drops in all); RTT-equivalent error (ACK direction ×2) mean %.3f p99 %.3f ms; emulator lateness a->b p99 %.0f µs, b->a p99 %.0f µs; bench process %.2f cores, others %.2f",
		tenGigStreams, gbps, bulk.Retransmits, whole.DroppedQueuePackets, rttEquiv.MeanMs, rttEquiv.P99Ms,
		late["a->b"].P99Us, late["b->a"].P99Us, cpu.ProcessCores, cpu.OthersCores)
	return nil
}
