package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"replab/internal/lab"
	"replab/internal/linkem/pcap"
)

func cmdCapture(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("capture", "replab capture [--lab NAME] [--state DIR] [--for 30s] [-o FILE] [--bytes 128] [LAB] A->B|A<->B",
		`Records the packets of a running lab's link direction to a pcap file until
Ctrl-C or --for has passed, then prints the file and how many packets it holds.
A->B captures one direction, A<->B both (one file each). The lab's process
writes the files: without -o they go to the lab's capture directory
(/var/lib/replab/LAB.captures for replab lab up, the results directory for
replab run) as capture-A-B-TIME.pcap.

Packets are recorded when the link delivers them to the far site; packets
the link drops are not in the file. Each record keeps the first --bytes
bytes of the packet (IP and TCP headers by default). Read a file with
tcpdump -nr FILE or open it in Wireshark. See docs/lab.md, "Packet captures".`)
	name := fs.String("lab", "", "which lab (needed when several run; or give LAB before the direction)")
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	dur := fs.Duration("for", 0, "stop after this long (default: at Ctrl-C)")
	outPath := fs.String("o", "", "write to this file (with A<->B: into this directory)")
	snap := fs.Int("bytes", pcap.DefaultSnapLen, fmt.Sprintf("keep at most this many bytes of each packet (%d to %d)", pcap.MinSnapLen, pcap.MaxSnapLen))
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch len(pos) {
	case 1:
	case 2:
		if *name != "" && *name != pos[0] {
			return fmt.Errorf("capture: lab %s given twice, differently (--lab %s)", pos[0], *name)
		}
		*name, pos = pos[0], pos[1:]
	default:
		return errors.New("capture: give a direction, e.g. replab capture primary->eu (or LAB primary->eu)")
	}
	dir, err := lab.ParseDirection(pos[0])
	if err != nil {
		return err
	}
	if *dur < 0 {
		return fmt.Errorf("capture: --for %s is negative", *dur)
	}
	if *snap < pcap.MinSnapLen || *snap > pcap.MaxSnapLen {
		return fmt.Errorf("capture: --bytes %d: want %d to %d", *snap, pcap.MinSnapLen, pcap.MaxSnapLen)
	}
	req := lab.CaptureRequest{From: dir.From, To: dir.To, Both: dir.Both, SnapBytes: *snap, For: *dur}
	if *outPath != "" {
		// The lab's process may run elsewhere: it gets an absolute path.
		if req.Path, err = filepath.Abs(*outPath); err != nil {
			return fmt.Errorf("capture: -o %s: %w", *outPath, err)
		}
	}
	c, err := lab.Connect(*state, *name)
	if err != nil {
		return err
	}
	until := "Ctrl-C to stop"
	if *dur > 0 {
		until = "for " + dur.String() + " (Ctrl-C stops sooner)"
	}
	caps, err := c.Capture(ctx, req, func(started []lab.CaptureStatus) {
		for _, cs := range started {
			fmt.Fprintf(out, "capturing %s into %s (first %d bytes of each packet)\n", cs.Direction, cs.File, cs.SnapBytes)
		}
		fmt.Fprintln(out, until)
	})
	for _, cs := range caps {
		line := fmt.Sprintf("%s: %d packets in %s", cs.Direction, cs.Packets, cs.File)
		if cs.DroppedRecords > 0 {
			line += fmt.Sprintf(" (%d more not recorded: the capture writer fell behind)", cs.DroppedRecords)
		}
		fmt.Fprintln(out, line)
	}
	return err
}
