package workloadtest

import (
	"context"
	"maps"
	"net"
	"sync"

	"replab/internal/engine"
)

// MemKV is an in-memory key-value cluster (engine.KVStore, engine.KVAcks)
// for the tests of workloads that put and get records: a master, and
// replicas whose copies are the master's as of the last Sync — so a test
// decides exactly how stale a replica read is. A read at a replica with
// engine.KVCommitPoint syncs that replica first (it waits for the
// client's commit, which here is always there).
type MemKV struct {
	Master   string
	Replicas []string
	// PutHook, when set, is asked before each put (n counts the puts from
	// 1): whether to apply it, and the error to return.
	PutHook func(n int) (apply bool, err error)

	mu      sync.Mutex
	data    map[string][]byte
	copies  map[string]map[string][]byte
	journal map[[2]int64]bool
	puts    int
}

// NewMemKV is a cluster of master m and the replicas.
func NewMemKV(m string, replicas ...string) *MemKV {
	k := &MemKV{Master: m, Replicas: replicas, data: map[string][]byte{}, copies: map[string]map[string][]byte{}, journal: map[[2]int64]bool{}}
	for _, r := range replicas {
		k.copies[r] = map[string][]byte{}
	}
	return k
}

// Sync makes every replica's copy the master's.
func (k *MemKV) Sync() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for r := range k.copies {
		k.copies[r] = maps.Clone(k.data)
	}
}

// Nodes implements engine.Cluster.
func (k *MemKV) Nodes() []engine.Node {
	out := []engine.Node{{Name: k.Master, Site: "a", Writable: true}}
	for _, r := range k.Replicas {
		out = append(out, engine.Node{Name: r, Site: "b", Upstreams: []string{k.Master}})
	}
	return out
}

// WaitFlowing implements engine.Cluster: Sync.
func (k *MemKV) WaitFlowing(context.Context) error { k.Sync(); return nil }

// ReplicationState implements engine.Cluster.
func (k *MemKV) ReplicationState(context.Context) ([]engine.ReplicaState, error) { return nil, nil }

// Processes implements engine.Cluster.
func (k *MemKV) Processes(context.Context) ([]engine.Process, error) { return nil, nil }

// Close implements engine.Cluster.
func (k *MemKV) Close() error { return nil }

// KVClient implements engine.KVStore.
func (k *MemKV) KVClient(context.Context, func(ctx context.Context, network, addr string) (net.Conn, error)) (engine.KVClient, error) {
	return &memClient{k: k}, nil
}

// AckKeys implements engine.KVAcks (every node holds the master's
// journal).
func (k *MemKV) AckKeys(_ context.Context, _ string, f func(writer int, seq int64)) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for j := range k.journal {
		f(int(j[0]), j[1])
	}
	return nil
}

type memClient struct{ k *MemKV }

func (c *memClient) Put(_ context.Context, recs []engine.KVRecord, stamp engine.KVStamp) (engine.KVCommit, error) {
	k := c.k
	k.mu.Lock()
	k.puts++
	n := k.puts
	k.mu.Unlock()
	apply, err := true, error(nil)
	if k.PutHook != nil {
		apply, err = k.PutHook(n)
	}
	if stamp.Sending != nil {
		stamp.Sending()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if apply {
		for _, r := range recs {
			k.data[string(r.Key)] = append([]byte(nil), r.Value...)
		}
		if stamp.AckSeq > 0 {
			k.journal[[2]int64{int64(stamp.AckWriter), stamp.AckSeq}] = true
		}
	}
	return engine.KVCommit{Node: k.Master, Position: int64(n)}, err
}

func (c *memClient) Get(_ context.Context, keys [][]byte, read engine.KVRead) (engine.KVValues, error) {
	k := c.k
	node := read.Node
	if node == "" {
		node = k.Master
	}
	if read.Consistency == engine.KVCommitPoint && node != k.Master {
		k.Sync()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	src := k.data
	if node != k.Master {
		src = k.copies[node]
	}
	out := engine.KVValues{Node: node, Values: make([][]byte, len(keys))}
	for i, key := range keys {
		if v, ok := src[string(key)]; ok {
			out.Values[i] = append([]byte{}, v...)
		}
	}
	return out, nil
}

func (c *memClient) Close() error { return nil }
