package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"replab/internal/engine"
)

// OpAcks is the acknowledged-commits journal of a workload whose operations
// are not SQL (TxType.Op) and put records into a key-value cluster. The
// driver journals SQL transactions itself (driver.Config.Journal) but
// cannot see inside an Op, so here the client does: every put of a client
// made by ConnectEnv.KVClient records its key — (writer, seq), writer the
// base plus the user — in the same transaction (engine.KVStamp), and its
// outcome here: acknowledged, or unknown (any error but a refusal before
// the commit, engine.ErrNotCommitted). The runner makes one per
// measurement and afterwards looks for the acknowledged keys at every
// node (engine.KVAcks).
type OpAcks struct {
	base  int
	users []opAcksUser
	used  atomic.Bool
}

// opAcksUser is one user's journal; its mutex only guards against a
// reader while a straggling operation ends after the run.
type opAcksUser struct {
	mu      sync.Mutex
	seq     int64
	acked   []int64
	unknown []int64
}

// NewOpAcks journals the puts of users 0 … users-1 under writers
// writerBase + user.
func NewOpAcks(users, writerBase int) *OpAcks {
	return &OpAcks{base: writerBase, users: make([]opAcksUser, users)}
}

// Used says whether any client journalled through it: a workload that
// made its clients otherwise journals nothing.
func (j *OpAcks) Used() bool { return j != nil && j.used.Load() }

// WriterBase is the writer of user 0.
func (j *OpAcks) WriterBase() int { return j.base }

// Outcomes calls f with each user's acknowledged and unknown seqs.
func (j *OpAcks) Outcomes(f func(user int, acked, unknown []int64)) {
	for i := range j.users {
		u := &j.users[i]
		u.mu.Lock()
		f(i, u.acked, u.unknown)
		u.mu.Unlock()
	}
}

// KVClient connects user's client to the key-value cluster, from the
// client's site. With a Journal its puts journal their keys and outcomes.
func (e ConnectEnv) KVClient(ctx context.Context, user int) (engine.KVClient, error) {
	kv, ok := e.Cluster.(engine.KVStore)
	if !ok {
		return nil, fmt.Errorf("the cluster (%T) takes no key-value puts", e.Cluster)
	}
	c, err := kv.KVClient(ctx, e.Dial)
	if err != nil {
		return nil, err
	}
	j := e.Acks
	if j == nil || user < 0 || user >= len(j.users) {
		return c, nil
	}
	j.used.Store(true)
	return &ackedKV{KVClient: c, u: &j.users[user], writer: j.base + user}, nil
}

// ackedKV is a client whose puts journal.
type ackedKV struct {
	engine.KVClient
	u      *opAcksUser
	writer int
}

func (c *ackedKV) Put(ctx context.Context, recs []engine.KVRecord, stamp engine.KVStamp) (engine.KVCommit, error) {
	u := c.u
	u.mu.Lock()
	u.seq++
	seq := u.seq
	u.mu.Unlock()
	stamp.AckWriter, stamp.AckSeq = c.writer, seq
	commit, err := c.KVClient.Put(ctx, recs, stamp)
	u.mu.Lock()
	switch {
	case err == nil:
		u.acked = append(u.acked, seq)
	case errors.Is(err, engine.ErrNotCommitted):
	default:
		u.unknown = append(u.unknown, seq)
	}
	u.mu.Unlock()
	return commit, err
}
