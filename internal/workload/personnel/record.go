package personnel

import (
	"hash/fnv"
	"sync"

	"replab/internal/history"
)

// The history ([run] history = true; issue 32): each person's description
// is a register. An update writes a fresh text, recorded as its 63-bit
// FNV-1a hash (texts of hundreds of random characters: no two alike); a
// lookup reads one, recorded as its hash when a write of this measurement
// wrote it, else as the register's initial nil — the loaded description,
// or one written by an earlier measurement of the run (older than every
// write of this history). So the checker and the stale-read count see
// personnel's updates and lookups as writes and reads of registers.

// texts remembers the hashes written in the current measurement, by
// person.
type texts struct {
	mu sync.Mutex
	by map[int64]map[int64]bool
}

// reset starts a measurement.
func (t *texts) reset() {
	t.mu.Lock()
	t.by = map[int64]map[int64]bool{}
	t.mu.Unlock()
}

func (t *texts) add(id, h int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[int64]map[int64]bool{}
	}
	m := t.by[id]
	if m == nil {
		m = map[int64]bool{}
		t.by[id] = m
	}
	m[h] = true
}

func (t *texts) has(id, h int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.by[id][h]
}

// textHash is a description's value in the history.
func textHash(b []byte) int64 {
	f := fnv.New64a()
	_, _ = f.Write(b)
	return int64(f.Sum64() >> 1)
}

// writeMop records an update of person id to text.
func (w *Workload) writeMop(id int64, text []byte) history.Mop {
	h := textHash(text)
	w.written.add(id, h)
	return history.Write(id, h)
}

// readMop records a lookup of person id that found text.
func (w *Workload) readMop(id int64, text string) history.Mop {
	h := textHash([]byte(text))
	if w.written.has(id, h) {
		return history.ReadValue(id, h)
	}
	return history.ReadNull(id)
}
