package main

import (
	"context"
	"fmt"
	"time"

	"replab/bench/internal/benchkit"
	"replab/internal/linkem/emu"
	"replab/internal/netcheck"
)

// iperfSeconds is the length of the ceiling and emulator iperf3 runs.
const iperfSeconds = 5

// veth measures the ceiling: iperf3 over a plain veth pair.
func (b *bench) veth(ctx context.Context) error {
	if err := vethUp(ctx); err != nil {
		return fmt.Errorf("veth pair: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := vethDown(cctx); err != nil {
			logf("      warning: remove veth namespaces: %v", err)
		}
	}()
	if err := b.probeFloor(ctx); err != nil {
		return err
	}
	res, err := iperf(ctx, netnsName(vethNSB), vethAddrB, netnsName(vethNSA), iperfSeconds)
	if err != nil {
		return fmt.Errorf("veth: %w", err)
	}
	b.vethBps = res.ReceivedBps
	b.r.Add(Figure{
		Name:       "veth_gbps",
		Value:      benchkit.Round(res.ReceivedBps/1e9, 3),
		Configured: map[string]any{"path": "veth pair between two namespaces", "congestion": "cubic", "duration_s": iperfSeconds},
		Note:       "the ceiling: iperf3 goodput at the receiver over a plain veth pair",
		Details:    map[string]any{"iperf3": res},
	})
	logf("      veth %.2f Gbit/s, %d retransmits", res.ReceivedBps/1e9, res.Retransmits)
	return nil
}

// emuThroughput measures iperf3 through an emulated link with no delay and
// no rate limit: what the emulator itself can carry.
func (b *bench) emuThroughput(ctx context.Context) error {
	l, err := upLab(ctx, "bench-emu", `
[site.a]
[site.b]
[[link]]
sites = ["a", "b"]
rate = "unlimited"
`)
	if err != nil {
		return err
	}
	defer closeLab(l)
	a, bb := l.Site("a"), l.Site("b")
	e := l.Emulator()

	tunBefore := map[string]uint64{}
	for _, s := range l.Sites() {
		if tunBefore[s.Name], err = tunTxDropped(ctx, s); err != nil {
			return err
		}
	}
	quiet, err := benchkit.WaitQuiet(ctx, quiet)
	if err != nil {
		return err
	}
	before := snapshot(e)
	lateness(e) // opens the window
	meter := startCPU()
	stopSampling, inFlight := sampleInFlight(e, "a", "b")
	res, err := iperf(ctx, bb, bb.Address, a, iperfSeconds)
	stopSampling()
	cpu := meter.Read()
	if err != nil {
		return fmt.Errorf("emulated link: %w", err)
	}
	late := lateness(e)
	after := snapshot(e)
	tunDrops := map[string]uint64{}
	var tunTotal uint64
	for _, s := range l.Sites() {
		n, err := tunTxDropped(ctx, s)
		if err != nil {
			return err
		}
		tunDrops[s.Name+" "+"wan0"] = n - tunBefore[s.Name]
		tunTotal += n - tunBefore[s.Name]
	}
	data, acks := delta(before, after, "a->b"), delta(before, after, "b->a")
	modelDrops := data.DroppedQueuePackets + data.DroppedLossPackets + data.DroppedOtherPackets +
		acks.DroppedQueuePackets + acks.DroppedLossPackets + acks.DroppedOtherPackets

	cfg := map[string]any{"rate": "unlimited", "one_way_delay_ms": 0, "congestion": "cubic", "duration_s": iperfSeconds}
	b.r.Add(Figure{
		Name: "emu_gbps", Value: benchkit.Round(res.ReceivedBps/1e9, 3), Configured: cfg,
		Note:    "iperf3 goodput at the receiver through the emulator (TUN in each site, one Go process in between)",
		Details: map[string]any{"iperf3": res},
	})
	if b.vethBps > 0 {
		b.r.Add(Figure{
			Name: "emu_to_veth_ratio", Value: benchkit.Round(res.ReceivedBps/b.vethBps, 3), Configured: cfg,
			Target: ">= 0.7", TargetMin: benchkit.Ptr(0.7),
			Details: map[string]any{"veth_gbps": benchkit.Round(b.vethBps/1e9, 3), "emu_gbps": benchkit.Round(res.ReceivedBps/1e9, 3)},
		})
	}
	b.r.Add(Figure{
		Name: "emu_lateness_p99_us", Value: benchkit.Round(late["a->b"].P99Us, 1), Configured: cfg,
		Note: "delivery lateness (handed to the TUN after its scheduled time) in the data direction during the run; " +
			"emu.FaithfulP99Us = 1000 is where the emulation stops being faithful",
		Details: map[string]any{"a->b": late["a->b"], "b->a": late["b->a"], "in_flight_a_to_b": inFlight()},
	})
	b.r.Add(Figure{
		Name: "emu_tun_tx_drops_packets", Value: float64(tunTotal), Configured: cfg,
		Note:    "packets the kernel dropped because a TUN txqueue was full (the emulator did not read fast enough)",
		Details: map[string]any{"by_device": tunDrops},
	})
	b.r.Add(Figure{
		Name: "emu_model_drops_packets", Value: float64(modelDrops), Configured: cfg,
		Note:    "drops by the link model (queue, loss, down, MTU); none are configured, so any is a bug",
		Details: map[string]any{"a->b": data, "b->a": acks},
	})
	b.r.Add(Figure{
		Name: "emu_retransmits_segments", Value: float64(res.Retransmits), Configured: cfg,
		Note: "iperf3 sender retransmits during the run",
	})
	b.r.Add(Figure{
		Name: "emu_cpu_cores", Value: cpu.ProcessCores, Configured: cfg,
		Note: "CPU used by the bench process (the emulator, including the kernel work of its TUN reads and writes; " +
			"iperf3 runs in its own processes) during the run, in cores",
		Details: map[string]any{"cpu": cpu, "wait_for_quiet_machine": quiet},
	})
	ratio := "no veth ceiling measured"
	if b.vethBps > 0 {
		ratio = fmt.Sprintf("%.3f of veth", res.ReceivedBps/b.vethBps)
	}
	logf("      emulated %.2f Gbit/s (%s), lateness p99 %.0f µs with %.0f packets waiting inside the emulator on average, %d retransmits, %d TUN drops, emulator %.2f cores",
		res.ReceivedBps/1e9, ratio, late["a->b"].P99Us, inFlight().MeanPackets, res.Retransmits, tunTotal, cpu.ProcessCores)
	return nil
}

// floorProbes is the number of probes of the measurement floor.
const floorProbes = 200

// probeFloor runs the RTT and one-way probes over the plain veth pair: what
// the probes themselves (sockets, Go scheduling) add with no emulator in
// the path. The emulator's own error is the RTT figures minus this.
func (b *bench) probeFloor(ctx context.Context) error {
	quiet, err := benchkit.WaitQuiet(ctx, quiet)
	if err != nil {
		return err
	}
	na, nb := netnsName(vethNSA), netnsName(vethNSB)
	srv, err := netcheck.StartServer(ctx, nb, vethAddrB)
	if err != nil {
		return fmt.Errorf("probe server on veth: %w", err)
	}
	defer srv.Close()
	p := runProbes(ctx, na, nb, vethAddrA, vethAddrB, srv, floorProbes, nil)
	if err := p.err(); err != nil {
		return fmt.Errorf("probes over veth: %w", err)
	}
	rtt := errorStats(p.rtt.SamplesMs, 0)
	b.floorRTTMs = rtt.MeanMs
	cfg := map[string]any{"path": "veth pair between two namespaces", "rtt_ms": 0, "probes": floorProbes,
		"probe_interval_ms": rttInterval.Milliseconds()}
	det := map[string]any{"rtt": rtt, "one_way_a_to_b": errorStats(p.owdAB.SamplesMs, 0),
		"one_way_b_to_a": errorStats(p.owdBA.SamplesMs, 0), "wait_for_quiet_machine": quiet}
	b.r.Add(Figure{Name: "probe_floor_rtt_mean_ms", Value: rtt.MeanMs, Configured: cfg,
		Note: "netcheck.RTT over a plain veth pair (no emulator): what the measurement itself adds to every RTT figure", Details: det})
	b.r.Add(Figure{Name: "probe_floor_rtt_p99_ms", Value: rtt.P99Ms, Configured: cfg})
	logf("      probe floor over veth: RTT mean %.3f ms, p99 %.3f ms", rtt.MeanMs, rtt.P99Ms)
	return nil
}

// inFlightStats describes how many packets waited inside the emulator.
type inFlightStats struct {
	Samples     int     `json:"samples"`
	MeanPackets float64 `json:"mean_packets"`
	MaxPackets  int     `json:"max_packets"`
}

// sampleInFlight samples, every 50 ms until stopped, how many packets the
// emulator holds for from->to (accepted, not yet delivered). On a link
// without rate and delay that is a queue inside the emulator itself.
func sampleInFlight(e *emu.Emulator, from, to string) (stop func(), result func() inFlightStats) {
	var st inFlightStats
	var sum int
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			for _, d := range e.Stats() {
				if d.From == from && d.To == to {
					st.Samples++
					sum += d.InFlight
					st.MaxPackets = max(st.MaxPackets, d.InFlight)
				}
			}
		}
	}()
	stop = func() { close(done); <-finished }
	result = func() inFlightStats {
		if st.Samples > 0 {
			st.MeanPackets = benchkit.Round(float64(sum)/float64(st.Samples), 1)
		}
		return st
	}
	return stop, result
}
