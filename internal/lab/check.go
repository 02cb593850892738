package lab

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"replab/internal/netcheck"
)

// CheckOptions tune Check.
type CheckOptions struct {
	Probes   int           // RTT probes per link (default 20)
	Duration time.Duration // TCP goodput window per direction (default 3s)
	Progress io.Writer     // one line per measurement started; nil = quiet
}

// CheckRow is one measured direction of a link.
type CheckRow struct {
	Direction         string  `json:"direction"` // "a->b"
	ConfiguredRTTMs   float64 `json:"configured_rtt_ms"`
	RTTP50Ms          float64 `json:"rtt_p50_ms"`
	RTTMeanMs         float64 `json:"rtt_mean_ms"`
	RTTP99Ms          float64 `json:"rtt_p99_ms"`
	ProbesLost        int     `json:"probes_lost"`
	RateBps           int64   `json:"rate_bps"` // 0 = unlimited
	GoodputBps        float64 `json:"goodput_bps"`
	Retransmits       uint32  `json:"retransmits"`
	ConfiguredLossPct float64 `json:"configured_loss_pct"`
}

// Check measures every link of a running lab from its first site: RTT by
// UDP echo, then TCP goodput each way (after a warmup that lets slow start
// finish). Links that are down are skipped.
func Check(ctx context.Context, l *Lab, opt CheckOptions) ([]CheckRow, error) {
	if opt.Probes <= 0 {
		opt.Probes = 20
	}
	if opt.Duration <= 0 {
		opt.Duration = 3 * time.Second
	}
	progress := opt.Progress
	if progress == nil {
		progress = io.Discard
	}
	var rows []CheckRow
	for _, lk := range l.Spec.Links {
		if lk.Forward.Down || lk.Reverse.Down {
			continue
		}
		a, b := l.Site(lk.A), l.Site(lk.B)
		srv, err := netcheck.StartServer(ctx, b, b.Address)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", lk.Name(), err)
		}
		rtt := lk.Forward.Delay + lk.Reverse.Delay
		fmt.Fprintf(progress, "  %s: %d RTT probes\n", lk.Name(), opt.Probes)
		// Space probes so they never queue behind each other, even at 9600 bit/s.
		r, err := netcheck.RTT(ctx, a, srv.Addr(), opt.Probes, 50*time.Millisecond)
		if err != nil {
			srv.Close()
			return nil, fmt.Errorf("check %s: %w", lk.Name(), err)
		}
		warmup := min(max(time.Second, 8*rtt), 10*time.Second)
		for _, d := range []struct {
			name string
			dir  netcheck.Direction
			rate int64
			loss float64
		}{
			{lk.A + "->" + lk.B, netcheck.Upload, lk.Forward.RateBps, lk.Forward.Loss},
			{lk.B + "->" + lk.A, netcheck.Download, lk.Reverse.RateBps, lk.Reverse.Loss},
		} {
			fmt.Fprintf(progress, "  %s: TCP goodput for %s after %s warmup\n", d.name, opt.Duration, warmup)
			t, err := netcheck.Throughput(ctx, a, srv.Addr(), d.dir, warmup, opt.Duration)
			if err != nil {
				srv.Close()
				return nil, fmt.Errorf("check %s: %w", d.name, err)
			}
			rows = append(rows, CheckRow{
				Direction:         d.name,
				ConfiguredRTTMs:   float64(rtt) / 1e6,
				RTTP50Ms:          r.P50Ms,
				RTTMeanMs:         r.MeanMs,
				RTTP99Ms:          r.P99Ms,
				ProbesLost:        r.Sent - r.Received,
				RateBps:           d.rate,
				GoodputBps:        t.GoodputBps,
				Retransmits:       t.Retransmits,
				ConfiguredLossPct: d.loss * 100,
			})
		}
		srv.Close()
	}
	return rows, nil
}

// WriteCheckTable prints measured against configured values. Goodput is
// TCP payload: with 1500-byte packets the ideal is 96.5 % of the rate.
func WriteCheckTable(w io.Writer, rows []CheckRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "direction\tRTT set ms\tRTT p50 ms\tRTT p99 ms\tprobes lost\trate set\tTCP goodput\tof rate\tretrans\tloss set\t")
	for _, r := range rows {
		ofRate := "-"
		if r.RateBps > 0 {
			ofRate = fmt.Sprintf("%.1f%%", 100*r.GoodputBps/float64(r.RateBps))
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%d\t%s\t%s\t%s\t%d\t%s%%\t\n",
			r.Direction, r.ConfiguredRTTMs, r.RTTP50Ms, r.RTTP99Ms, r.ProbesLost,
			FormatRate(r.RateBps), FormatRate(int64(r.GoodputBps)), ofRate, r.Retransmits, trimFloat(r.ConfiguredLossPct))
	}
	_ = tw.Flush()
}
