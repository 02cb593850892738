package lab

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"time"
)

// SeriesHeader is the header of the per-second link CSV. Counters are
// cumulative since the lab started; lateness is over the last second. The
// delivered bytes by traffic class (linkem.Class, in its order) come last
// and sum to delivered_bytes.
const SeriesHeader = "time_s,direction,offered_packets,offered_bytes,delivered_packets,delivered_bytes," +
	"dropped_queue_packets,dropped_loss_packets,dropped_other_packets,queue_bytes,queue_high_water_bytes," +
	"rate_bps,lateness_p99_us,lateness_max_us," +
	"other_bytes,replication_bytes,client_bytes,storage_bytes"

// startSeries samples every direction once a second into path.
func (l *Lab) startSeries(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("link series: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, SeriesHeader)
	start := time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	sample := func() {
		t := strconv.FormatFloat(time.Since(start).Seconds(), 'f', 3, 64)
		for _, d := range l.emu.Window() {
			c := d.Counters
			fmt.Fprintf(w, "%s,%s->%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.1f,%.1f", t, d.From, d.To,
				c.OfferedPackets, c.OfferedBytes, c.DeliveredPackets, c.DeliveredBytes,
				c.DroppedQueuePackets, c.DroppedLossPackets, c.DroppedOtherPackets,
				c.QueueBytes, c.QueueHighWaterBytes, d.Params.RateBps, d.Lateness.P99Us, d.Lateness.MaxUs)
			for _, b := range c.ClassBytes {
				fmt.Fprintf(w, ",%d", b)
			}
			fmt.Fprintln(w)
		}
		_ = w.Flush()
	}
	go func() {
		defer close(done)
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				sample()
			case <-stop:
				sample()
				return
			}
		}
	}()
	return func() {
		close(stop)
		<-done
		_ = w.Flush()
		_ = f.Close()
	}, nil
}
