package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/netcheck"
)

// RTT accuracy: 25 ms each way (50 ms RTT) on a 1gbit link.
const (
	rttOneWayMs   = 25.0
	rttRateBps    = 1_000_000_000
	rttProbes     = 500
	rttInterval   = 10 * time.Millisecond
	rttEchoBytes  = 25 + 8 + 20 // netcheck's echo probe: payload + UDP + IPv4
	loadedWarmup  = 3 * time.Second
	rttMeanTarget = 0.2 // ms
	rttP99Target  = 1.0 // ms
)

// The sites' socket buffers allow a window of several BDPs (the kernel's
// default 6 MiB maximum holds a flow to ~500 Mbit/s at 50 ms), so the bulk
// flow can fill the 1gbit link and its queue.
const rttSpec = `
[site.a]
tcp_rmem = "4096 131072 33554432"
tcp_wmem = "4096 16384 33554432"
[site.b]
tcp_rmem = "4096 131072 33554432"
tcp_wmem = "4096 16384 33554432"
[[link]]
sites = ["a", "b"]
delay = "25ms"
rate = "1gbit"
`

// configured round trip of netcheck's echo, and one way of our probe,
// including their serialization at 1 Gbit/s (under a microsecond).
var (
	rttConfiguredMs = 2*rttOneWayMs + 2*serializationMs(rttEchoBytes, rttRateBps)
	owdConfiguredMs = rttOneWayMs + serializationMs(owdPacketBytes, rttRateBps)
)

func rttConfig() map[string]any {
	return map[string]any{"rtt_ms": 2 * rttOneWayMs, "one_way_delay_ms": rttOneWayMs, "rate": "1gbit",
		"probes": rttProbes, "probe_interval_ms": rttInterval.Milliseconds()}
}

// runProbes runs, at the same time: netcheck.RTT from a to the server in
// b, and one-way probes a->b and b->a. The streams are offset by a third
// of the interval so that their packets and wake-ups do not coincide.
type probeSet struct {
	rtt      netcheck.RTTResult
	owdAB    owdResult
	owdBA    owdResult
	rttErr   error
	owdABErr error
	owdBAErr error
}

func runProbes(ctx context.Context, a, b netcheck.Netns, aAddr, bAddr netip.Addr, srv *netcheck.Server, n int, tap *probeTap) probeSet {
	var p probeSet
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		p.rtt, p.rttErr = netcheck.RTT(ctx, a, srv.Addr(), n, rttInterval)
	}()
	go func() {
		defer wg.Done()
		if p.owdABErr = benchkit.Sleep(ctx, rttInterval/3); p.owdABErr == nil {
			p.owdAB, p.owdABErr = oneWay(ctx, a, b, bAddr, n, rttInterval, tap)
		}
	}()
	go func() {
		defer wg.Done()
		if p.owdBAErr = benchkit.Sleep(ctx, 2*rttInterval/3); p.owdBAErr == nil {
			p.owdBA, p.owdBAErr = oneWay(ctx, b, a, aAddr, n, rttInterval, tap)
		}
	}()
	wg.Wait()
	return p
}

func (p probeSet) err() error {
	for _, e := range []error{p.rttErr, p.owdABErr, p.owdBAErr} {
		if e != nil {
			return e
		}
	}
	return nil
}

// rttIdle measures RTT (and one-way delays) on an idle link.
func (b *bench) rttIdle(ctx context.Context) error {
	l, err := upLab(ctx, "bench-rtt-idle", rttSpec)
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
	quiet, err := benchkit.WaitQuiet(ctx, quiet)
	if err != nil {
		return err
	}
	var tap probeTap
	defer tap.install(l.Emulator())()
	lateness(l.Emulator())
	meter := startCPU()
	p := runProbes(ctx, a, bb, a.Address, bb.Address, srv, rttProbes, &tap)
	cpu := meter.Read()
	late := lateness(l.Emulator())
	if err := p.err(); err != nil {
		return err
	}
	st := errorStats(p.rtt.SamplesMs, rttConfiguredMs)
	ab, ba := errorStats(p.owdAB.SamplesMs, owdConfiguredMs), errorStats(p.owdBA.SamplesMs, owdConfiguredMs)
	details := map[string]any{
		"rtt_error": st, "probes_sent": p.rtt.Sent, "probes_received": p.rtt.Received,
		"configured_rtt_with_serialization_ms": benchkit.Round(rttConfiguredMs, 6),
		"one_way_a_to_b_error":                 ab, "one_way_b_to_a_error": ba,
		"emulator_lateness": late, "cpu": cpu, "wait_for_quiet_machine": quiet,
		"one_way_a_to_b_breakdown": breakdown(p.owdAB.Probes, owdConfiguredMs),
		"one_way_b_to_a_breakdown": breakdown(p.owdBA.Probes, owdConfiguredMs),
	}
	if b.floorRTTMs > 0 {
		details["error_mean_minus_probe_floor_ms"] = benchkit.Round(st.MeanMs-b.floorRTTMs, 4)
	}
	b.r.Add(Figure{Name: "rtt_idle_error_mean_ms", Value: st.MeanMs, Configured: rttConfig(),
		Target: "<= 0.2 ms", TargetMax: benchkit.Ptr(rttMeanTarget), Note: "netcheck.RTT (UDP echo) mean minus configured RTT", Details: details})
	b.r.Add(Figure{Name: "rtt_idle_error_p99_ms", Value: st.P99Ms, Configured: rttConfig(),
		Target: "<= 1 ms", TargetMax: benchkit.Ptr(rttP99Target), Note: "99th percentile of measured minus configured RTT"})
	if cpu.OthersCores > 0.3 {
		logf("      warning: other processes used %.2f cores meanwhile: idle figures include their interference", cpu.OthersCores)
	}
	logf("      idle RTT error mean %.3f ms, p99 %.3f ms (min %.3f); one-way a->b mean %.3f p99 %.3f, b->a mean %.3f p99 %.3f; lost %d/%d",
		st.MeanMs, st.P99Ms, st.MinMs, ab.MeanMs, ab.P99Ms, ba.MeanMs, ba.P99Ms, p.rtt.Sent-p.rtt.Received, p.rtt.Sent)
	return nil
}

// rttLoaded measures delays while a bulk TCP flow a->b fills the link.
//
// Any round trip crosses both directions, so a round-trip probe always
// waits behind the bulk flow's queue (up to one BDP, i.e. up to 50 ms
// here): that is real link behaviour, not emulator error. The emulator's
// error under load is therefore measured one way, in the direction that
// carries only the bulk flow's ACKs (b->a), and doubled to compare with the
// RTT targets; the round trip and the one-way delay through the loaded
// direction are reported separately, queueing included.
func (b *bench) rttLoaded(ctx context.Context) error {
	l, err := upLab(ctx, "bench-rtt-load", rttSpec)
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
	// The bulk flow must outlast the probes, including netcheck.RTT's wait
	// for late replies (2 s + 3 × the largest RTT seen).
	bulkSeconds := int((loadedWarmup + probeTime + 3*time.Second).Seconds())
	bulkCtx, stopBulk := context.WithCancel(ctx)
	var bulk iperfResult
	var bulkErr error
	bulkDone := make(chan struct{})
	go func() {
		defer close(bulkDone)
		bulk, bulkErr = iperf(bulkCtx, bb, bb.Address, a, bulkSeconds)
	}()
	// On every return, iperf3 has ended before the lab closes.
	defer func() {
		stopBulk()
		<-bulkDone
	}()
	if err := benchkit.Sleep(ctx, loadedWarmup); err != nil {
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
	default: // still running, as it should: wait for its figures
		<-bulkDone
	}
	if bulkErr != nil {
		return fmt.Errorf("bulk flow: %w", bulkErr)
	}
	if endedEarly {
		return fmt.Errorf("the bulk flow (%d s) ended before the probes did", bulkSeconds)
	}
	if err := p.err(); err != nil {
		return err
	}

	ack := errorStats(p.owdBA.SamplesMs, owdConfiguredMs)
	data := errorStats(p.owdAB.SamplesMs, owdConfiguredMs)
	same := errorStats(p.rtt.SamplesMs, rttConfiguredMs)
	rttEquiv := ack.scaled(2)
	dataDelta := delta(before, after, "a->b")
	cfg := rttConfig()
	cfg["load"] = "iperf3 cubic a->b, link rate 1gbit, default 1-BDP queue"
	load := map[string]any{
		"bulk_goodput_mbps":               benchkit.Round(bulk.ReceivedBps/1e6, 1),
		"bulk_retransmits":                bulk.Retransmits,
		"data_direction_during_probes":    dataDelta,
		"ack_direction_during_probes":     delta(before, after, "b->a"),
		"emulator_lateness_during_probes": late,
		"cpu_during_probes":               cpu,
		"wait_for_quiet_machine":          quiet,
	}
	method := "2 × (one-way delay − 25 ms) of probes b->a, the direction carrying only the bulk flow's ACKs; " +
		"sender and receiver share this process's monotonic clock. A round-trip probe cannot avoid the loaded direction's queue."
	b.r.Add(Figure{Name: "rtt_loaded_error_mean_ms", Value: rttEquiv.MeanMs, Configured: cfg,
		Target: "<= 0.2 ms", TargetMax: benchkit.Ptr(rttMeanTarget), Note: method,
		Details: map[string]any{"round_trip_equivalent_error": rttEquiv, "load": load,
			"one_way_received": len(p.owdBA.SamplesMs), "one_way_sent": p.owdBA.Sent}})
	b.r.Add(Figure{Name: "rtt_loaded_error_p99_ms", Value: rttEquiv.P99Ms, Configured: cfg,
		Target: "<= 1 ms", TargetMax: benchkit.Ptr(rttP99Target), Note: method})
	b.r.Add(Figure{Name: "owd_loaded_ack_dir_error_mean_ms", Value: ack.MeanMs, Configured: cfg,
		Target: "<= 0.1 ms (half the RTT target)", TargetMax: benchkit.Ptr(rttMeanTarget / 2),
		Note: "one-way delay b->a (ACK direction of the bulk flow) minus 25 ms", Details: map[string]any{"error": ack}})
	b.r.Add(Figure{Name: "owd_loaded_ack_dir_error_p99_ms", Value: ack.P99Ms, Configured: cfg,
		Target: "<= 0.5 ms (half the RTT target)", TargetMax: benchkit.Ptr(rttP99Target / 2)})
	split := breakdown(p.owdBA.Probes, owdConfiguredMs)
	b.r.Add(Figure{Name: "owd_loaded_ack_dir_kernel_rx_error_mean_ms", Value: split.KernelRxError.MeanMs, Configured: cfg,
		Note: "the same probes b->a timed at the receiving kernel (SO_TIMESTAMPNS) instead of the receiving goroutine: " +
			"the link's error without the measuring probe's own wake-up; details split every probe's error into where its time went",
		Details: map[string]any{"breakdown": split}})
	b.r.Add(Figure{Name: "owd_loaded_ack_dir_kernel_rx_error_p99_ms", Value: split.KernelRxError.P99Ms, Configured: cfg})
	ackLate := late["b->a"]
	b.r.Add(Figure{Name: "emu_lateness_loaded_ack_dir_mean_us", Value: benchkit.Round(ackLate.MeanUs, 1), Configured: cfg,
		Note:    "the emulator's own delivery lateness (written after the due time) over every packet b->a during the probes",
		Details: map[string]any{"lateness": ackLate}})
	b.r.Add(Figure{Name: "emu_lateness_loaded_ack_dir_p99_us", Value: benchkit.Round(ackLate.P99Us, 1), Configured: cfg})
	b.r.Add(Figure{Name: "rtt_loaded_same_dir_error_mean_ms", Value: same.MeanMs, Configured: cfg,
		Note:    "INCLUDES QUEUEING DELAY: netcheck.RTT round trip a->b->a, crossing the bulk flow's queue (up to 1 BDP = 50 ms)",
		Details: map[string]any{"error": same, "probes_sent": p.rtt.Sent, "probes_received": p.rtt.Received}})
	b.r.Add(Figure{Name: "rtt_loaded_same_dir_error_p99_ms", Value: same.P99Ms, Configured: cfg,
		Note: "INCLUDES QUEUEING DELAY (see rtt_loaded_same_dir_error_mean_ms)"})
	b.r.Add(Figure{Name: "owd_loaded_data_dir_error_mean_ms", Value: data.MeanMs, Configured: cfg,
		Note:    "INCLUDES QUEUEING DELAY: one-way delay a->b, behind the bulk flow's queue, minus 25 ms",
		Details: map[string]any{"error": data, "received": len(p.owdAB.SamplesMs), "sent": p.owdAB.Sent}})
	b.r.Add(Figure{Name: "owd_loaded_data_dir_error_p99_ms", Value: data.P99Ms, Configured: cfg,
		Note: "INCLUDES QUEUEING DELAY (see owd_loaded_data_dir_error_mean_ms)"})
	b.r.Add(Figure{Name: "rtt_loaded_bulk_mbps", Value: benchkit.Round(bulk.ReceivedBps/1e6, 1), Configured: cfg,
		Note: "the load: iperf3 goodput a->b over the whole bulk run (warmup included)", Details: load})
	logf("      load %.0f Mbit/s; RTT-equivalent error (ACK direction ×2) mean %.3f p99 %.3f ms; through the queue: RTT mean %+.2f p99 %+.2f ms, one-way a->b mean %+.2f p99 %+.2f ms",
		bulk.ReceivedBps/1e6, rttEquiv.MeanMs, rttEquiv.P99Ms, same.MeanMs, same.P99Ms, data.MeanMs, data.P99Ms)
	logf("      one-way b->a mean error %.3f ms = before the emulator %.3f + emulator lateness %.3f + write to socket %.3f + receiver wake-up %.3f (+ model %.3f); emulator lateness b->a mean %.0f µs p99 %.0f µs",
		ack.MeanMs, split.SendToRead.MeanMs, split.Lateness.MeanMs, split.WriteToKernelRx.MeanMs, split.ReceiverWakeup.MeanMs, split.LinkModel.MeanMs, ackLate.MeanUs, ackLate.P99Us)
	return nil
}
