package orderentry

import (
	"fmt"
	"sync"
)

// Keys of the rows the transactions insert (customers, addresses, cards,
// logons, orders) never collide, at one node or across masters, and never
// meet a loaded row's key:
//
//	key = epoch << 42 | user << 28 | n
//
// n counts the user's inserts (1, 2, … shared by the five tables) for as
// long as the Workload lives, across the measurements of a run; user is
// the driver's user number, unique across every master of a run (user i
// writes at master i mod masters). So each user writes its own range of
// keys, growing to the right as a sequence would (an Oracle RAC
// sequence cached per instance behaves alike). epoch is random per
// Workload, from 1 to 2^21-1: two runs against the same tables collide
// only if they draw the same epoch (about one in two million). Loaded keys
// are below 2^40, so below every epoch's range.
const (
	seqBits   = 28
	userBits  = 14 // [run] users is at most 10,000
	epochBits = 63 - seqBits - userBits
	maxLoaded = 1 << 40
)

type keys struct {
	epoch uint64
	mu    sync.Mutex
	next  []uint64 // by user
}

func newKeys(random uint64) *keys {
	e := random % (1<<epochBits - 1)
	return &keys{epoch: e + 1}
}

// New is user's next key.
func (k *keys) New(user int) (int64, error) {
	if user < 0 || user >= 1<<userBits {
		return 0, fmt.Errorf("user %d: keys have room for users 0..%d", user, 1<<userBits-1)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if user >= len(k.next) {
		k.next = append(k.next, make([]uint64, user+1-len(k.next))...)
	}
	n := k.next[user] + 1
	if n >= 1<<seqBits {
		return 0, fmt.Errorf("user %d inserted %d rows: no keys left in its range", user, n-1)
	}
	k.next[user] = n
	return int64(k.epoch<<(seqBits+userBits) | uint64(user)<<seqBits | n), nil
}

// Owner is the user whose range key is in, or -1 for a loaded key.
func Owner(key int64) int {
	if key < maxLoaded {
		return -1
	}
	return int(key>>seqBits) & (1<<userBits - 1)
}
