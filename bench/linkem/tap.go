package main

import (
	"encoding/binary"
	"sync"

	"replab/internal/linkem/emu"
)

// hopTimes is where one probe packet was inside the emulator (clock.Now ns).
type hopTimes struct {
	readAt, dueAt, writeAt int64
}

// probeTap follows one-way probes through the emulator (emu.SetTap): for
// each probe it records when the emulator read it, when it was due and when
// it was written, so a probe's error splits into the part before the
// emulator, the emulator's own lateness, and the part after it.
type probeTap struct {
	mu    sync.Mutex
	flows map[uint16][]hopTimes // receiver's UDP port -> times by sequence number
}

// install puts the tap on e; remove takes it off.
func (pt *probeTap) install(e *emu.Emulator) (remove func()) {
	pt.flows = map[uint16][]hopTimes{}
	e.SetTap(pt.see)
	return func() { e.SetTap(nil) }
}

// follow starts recording probes to port (n sequence numbers); the returned
// function stops and returns what was recorded (zero times: not seen).
func (pt *probeTap) follow(port uint16, n int) (stop func() []hopTimes) {
	if pt == nil {
		return func() []hopTimes { return nil }
	}
	pt.mu.Lock()
	pt.flows[port] = make([]hopTimes, n)
	pt.mu.Unlock()
	return func() []hopTimes {
		pt.mu.Lock()
		defer pt.mu.Unlock()
		h := pt.flows[port]
		delete(pt.flows, port)
		return h
	}
}

// see runs on the emulator's delivering threads for every packet: it must
// be quick, so it returns at once for anything but a UDP probe.
func (pt *probeTap) see(pkt []byte, readAt, dueAt, writeAt int64) {
	if len(pkt) < 20 || pkt[9] != 17 { // not UDP (the bulk flow is TCP)
		return
	}
	ihl := int(pkt[0]&0x0f) * 4
	if len(pkt) != ihl+8+owdPayload {
		return
	}
	port := binary.BigEndian.Uint16(pkt[ihl+2 : ihl+4])
	seq := binary.BigEndian.Uint64(pkt[ihl+8 : ihl+16])
	pt.mu.Lock()
	if h, ok := pt.flows[port]; ok && seq < uint64(len(h)) {
		h[seq] = hopTimes{readAt, dueAt, writeAt}
	}
	pt.mu.Unlock()
}
