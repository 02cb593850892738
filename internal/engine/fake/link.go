package fake

import (
	"sync"
	"time"

	"replab/internal/linkem"
)

// A change crosses the lab's link between its sender's site and its
// receiver's as the link emulator would carry it as one packet: it leaves
// once the direction is free and its bytes are serialized at the link's
// rate, then takes the link's delay; the fake's own delay (the applier's)
// comes on top. The link is read when the change is sent, so a link
// changed while the lab runs (replab link set, a link search) applies from
// the next change on. Loss, jitter and a link that is down are not
// modelled, nor are paths across several links: nodes in sites without a
// direct link get the fake's delay alone.

// linkClocks is when each direction is next free, for the changes the
// fake sends across it.
type linkClocks struct {
	mu   sync.Mutex
	free map[[2]string]time.Time
}

// cross is when a change of size bytes sent from->to at now arrives.
func (lc *linkClocks) cross(from, to string, now time.Time, size int, p linkem.Params) time.Time {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.free == nil {
		lc.free = map[[2]string]time.Time{}
	}
	k := [2]string{from, to}
	depart, due := linkDue(now, lc.free[k], size, p)
	lc.free[k] = depart
	return due
}

// linkDue is the link model's arithmetic for one change: it departs at
// max(now, free) plus its serialization time (none on an unlimited link)
// and is due after the link's delay.
func linkDue(now, free time.Time, size int, p linkem.Params) (depart, due time.Time) {
	depart = now
	if p.RateBps > 0 {
		if free.After(depart) {
			depart = free
		}
		depart = depart.Add(time.Duration(float64(size) * 8 / float64(p.RateBps) * float64(time.Second)))
	}
	return depart, depart.Add(p.Delay)
}

// size is a change's bytes on the wire, roughly: its row images (strings
// and byte slices as long as they are, 8 bytes for any other value, 16
// for each table and key) and 40 bytes of headers.
func (ch *change) size() int {
	n := 40
	for _, op := range ch.ops {
		n += 16 + len(op.table) + len(op.key)
		for _, v := range op.row {
			switch x := v.(type) {
			case string:
				n += len(x)
			case []byte:
				n += len(x)
			default:
				n += 8
			}
		}
	}
	return n
}
