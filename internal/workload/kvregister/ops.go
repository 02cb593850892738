package kvregister

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"replab/internal/engine"
	"replab/internal/history"
	"replab/internal/workload"
)

// One client per user, from the client's site: a write goes to the master
// (the client follows it), a read to where reads_at says. Each operation
// records its micro-operations and the node it ran at through the call's
// recorder (OpCall.Rec); the driver times it and writes it with its
// outcome: ok, fail when nothing certainly committed (a read, or a put the
// engine refused before its commit: engine.ErrNotCommitted), info when a
// put may have committed.

var _ workload.Connector = (*Workload)(nil)

// Connect implements workload.Connector: one client per user (its puts
// journalled when verification is on), and a new set of registers for this
// measurement, so its history starts from empty registers.
func (w *Workload) Connect(ctx context.Context, env workload.ConnectEnv) error {
	if _, ok := env.Cluster.(engine.KVStore); !ok {
		return fmt.Errorf("kv-register: the cluster (%T) takes no key-value puts", env.Cluster)
	}
	var nodes, replicas []string
	for _, n := range env.Nodes {
		nodes = append(nodes, n.Name)
		if !n.Writable {
			replicas = append(replicas, n.Name)
		}
	}
	if w.readsAt == ReadsAtReplica && len(replicas) == 0 && w.readShare > 0 {
		return errors.New(`kv-register: reads_at = "replica", but the cluster has no replica`)
	}
	us := make([]*user, env.Users)
	for i := range us {
		c, err := env.KVClient(ctx, i)
		if err != nil {
			for _, u := range us[:i] {
				u.c.Close()
			}
			return fmt.Errorf("user %d: %w", i, err)
		}
		us[i] = &user{c: c}
		if len(replicas) > 0 {
			us[i].readAt = replicas[i%len(replicas)]
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.users, w.cluster, w.nodes = us, env.Cluster, nodes
	w.keyBase = w.round * int64(w.keys)
	w.round++
	return nil
}

// Close implements workload.Connector.
func (w *Workload) Close() error {
	w.mu.Lock()
	us := w.users
	w.users = nil
	w.mu.Unlock()
	var errs []error
	for _, u := range us {
		errs = append(errs, u.c.Close())
	}
	return errors.Join(errs...)
}

func (w *Workload) user(i int) (*user, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i < 0 || i >= len(w.users) {
		return nil, errors.New("kv-register: not connected")
	}
	return w.users[i], nil
}

// regKey is the record key of register k.
func regKey(k int64) []byte {
	return binary.BigEndian.AppendUint64([]byte("reg:"), uint64(k))
}

// regValue is the record value of a register holding v.
func regValue(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// pickKeys draws n distinct registers of this measurement, in ascending
// order: every transaction locks registers in one order, so two never
// wait for each other (JE would end one with a lock timeout).
func (w *Workload) pickKeys(r *rand.Rand, n int) []int64 {
	n = min(n, w.keys)
	ks := make([]int64, 0, n)
	for len(ks) < n {
		k := w.keyBase + int64(r.IntN(w.keys))
		dup := false
		for _, x := range ks {
			dup = dup || x == k
		}
		if !dup {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// write puts a new unique value into each of 1 … ops_per_txn registers,
// in one transaction at the master.
func (w *Workload) write(ctx context.Context, call workload.OpCall, r *rand.Rand) (int64, error) {
	u, err := w.user(call.User)
	if err != nil {
		return 0, err
	}
	keys := w.pickKeys(r, 1+r.IntN(w.opsPerTxn))
	mops := make([]history.Mop, len(keys))
	recs := make([]engine.KVRecord, len(keys))
	for i, k := range keys {
		v := w.next.Add(1)
		mops[i] = history.Write(k, v)
		recs[i] = engine.KVRecord{Key: regKey(k), Value: regValue(v)}
	}
	call.Rec.Record(mops)
	commit, err := u.c.Put(ctx, recs, engine.KVStamp{Writer: call.User, Seq: call.Seq, Sending: call.Sending})
	call.Rec.AtNode(commit.Node)
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", history.MopsText(mops), err)
	}
	return int64(len(recs)), nil
}

// read reads 1 … ops_per_txn registers in one read-only transaction, at
// the master, the user's replica or any node (reads_at), after the
// replica meets the consistency policy.
func (w *Workload) read(ctx context.Context, call workload.OpCall, r *rand.Rand) (int64, error) {
	u, err := w.user(call.User)
	if err != nil {
		return 0, err
	}
	keys := w.pickKeys(r, 1+r.IntN(w.opsPerTxn))
	at := engine.KVRead{Consistency: w.consistency, MaxLag: w.maxLag, Timeout: w.timeout}
	switch w.readsAt {
	case ReadsAtReplica:
		at.Node = u.readAt
	case ReadsAtAny:
		at.Node = w.nodes[r.IntN(len(w.nodes))]
	}
	rk := make([][]byte, len(keys))
	for i, k := range keys {
		rk[i] = regKey(k)
	}
	// Every read is the initial nil until a value comes back (the driver
	// makes them unknown if the read fails).
	mops := make([]history.Mop, len(keys))
	for i, k := range keys {
		mops[i] = history.ReadNull(k)
	}
	call.Rec.Record(mops)
	got, err := u.c.Get(ctx, rk, at)
	call.Rec.AtNode(got.Node)
	if err == nil && len(got.Values) != len(keys) {
		err = fmt.Errorf("%d values for %d keys", len(got.Values), len(keys))
	}
	if err == nil {
		for i, k := range keys {
			switch v := got.Values[i]; {
			case v == nil: // the initial nil
			case len(v) == 8:
				mops[i] = history.ReadValue(k, int64(binary.BigEndian.Uint64(v)))
			default:
				err = fmt.Errorf("register %d holds %d bytes, not a value of 8", k, len(v))
			}
		}
	}
	if err != nil {
		return 0, fmt.Errorf("read %s at %s: %w", history.MopsText(mops), nodeName(got.Node), err)
	}
	return 0, nil
}

func nodeName(n string) string {
	if n == "" {
		return "the master"
	}
	return n
}
