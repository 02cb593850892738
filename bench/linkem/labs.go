package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"time"

	"replab/internal/lab"
	"replab/internal/linkem"
	"replab/internal/linkem/emu"
	"replab/internal/spec"
)

// upLab starts a lab from spec text (everything after the [lab] table).
// The caller must Close it.
func upLab(ctx context.Context, name, body string) (*lab.Lab, error) {
	text := fmt.Sprintf("[lab]\nname = %q\n%s", name, body)
	s, err := spec.Parse(name+".toml", []byte(text))
	if err != nil {
		return nil, fmt.Errorf("spec of lab %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, s, lab.Options{NoControl: true})
	if err != nil {
		return nil, fmt.Errorf("start lab %s: %w", name, err)
	}
	return l, nil
}

// closeLab closes l and reports a failure on stderr (the figures stand).
func closeLab(l *lab.Lab) {
	if err := l.Close(); err != nil {
		logf("      warning: close lab %s: %v", l.Spec.Lab.Name, err)
	}
}

// dirSnapshot is one direction's counters at a moment.
type dirSnapshot map[string]linkem.Counters // "a->b" -> counters

func snapshot(e *emu.Emulator) dirSnapshot {
	m := dirSnapshot{}
	for _, d := range e.Stats() {
		m[d.From+"->"+d.To] = d.Counters
	}
	return m
}

// counterDelta is what happened in one direction between two snapshots.
type counterDelta struct {
	OfferedPackets      uint64 `json:"offered_packets"`
	DeliveredPackets    uint64 `json:"delivered_packets"`
	DeliveredBytes      uint64 `json:"delivered_bytes"`
	DroppedQueuePackets uint64 `json:"dropped_queue_packets"`
	DroppedLossPackets  uint64 `json:"dropped_loss_packets"`
	DroppedOtherPackets uint64 `json:"dropped_other_packets"`
	QueueHighWaterBytes int64  `json:"queue_high_water_bytes"` // since the lab started
}

func delta(before, after dirSnapshot, dir string) counterDelta {
	a, b := after[dir], before[dir]
	return counterDelta{
		OfferedPackets:      a.OfferedPackets - b.OfferedPackets,
		DeliveredPackets:    a.DeliveredPackets - b.DeliveredPackets,
		DeliveredBytes:      a.DeliveredBytes - b.DeliveredBytes,
		DroppedQueuePackets: a.DroppedQueuePackets - b.DroppedQueuePackets,
		DroppedLossPackets:  a.DroppedLossPackets - b.DroppedLossPackets,
		DroppedOtherPackets: a.DroppedOtherPackets - b.DroppedOtherPackets,
		QueueHighWaterBytes: a.QueueHighWaterBytes,
	}
}

// lateness returns each direction's delivery lateness since the previous
// call (the first call starts the window). Nothing else in the bench reads
// the emulator's window (labs run without a series file).
func lateness(e *emu.Emulator) map[string]emu.Lateness {
	m := map[string]emu.Lateness{}
	for _, d := range e.Window() {
		m[d.From+"->"+d.To] = d.Lateness
	}
	return m
}

// tunTxDropped reads the tx_dropped counter of a site's TUN device: packets
// the kernel could not queue to the emulator (a full txqueue).
func tunTxDropped(ctx context.Context, s *lab.Site) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "-j", "-s", "-n", s.Netns, "link", "show", lab.TUNName).Output()
	if err != nil {
		return 0, fmt.Errorf("read %s counters in %s: %w", lab.TUNName, s.Name, err)
	}
	var links []struct {
		Stats struct {
			TX struct {
				Dropped uint64 `json:"dropped"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		return 0, fmt.Errorf("parse %s counters in %s: %v", lab.TUNName, s.Name, err)
	}
	return links[0].Stats.TX.Dropped, nil
}

// serializationMs is how long size bytes take at rate bit/s, in ms.
func serializationMs(size int, rateBps int64) float64 {
	if rateBps <= 0 {
		return 0
	}
	return float64(size) * 8 / float64(rateBps) * 1e3
}
