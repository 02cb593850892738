package kvinsert

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"replab/internal/engine"
	"replab/internal/workload"
)

// On an engine that stores records (engine.KV: Berkeley DB Java
// Edition), each insert is a put through the cluster's own protocol, one
// client connection per user, with the lag stamp in the same transaction.

// kvClients are the users' connections to a key-value cluster.
type kvClients struct {
	mu      sync.Mutex
	clients []engine.KVClient
}

var _ workload.Connector = (*Workload)(nil)

// Connect implements workload.Connector: on a key-value cluster, one
// client per user, from the client's site; nothing on an SQL one (the
// driver connects).
func (w *Workload) Connect(ctx context.Context, env workload.ConnectEnv) error {
	if w.dialect != engine.KV {
		return nil
	}
	if _, ok := env.Cluster.(engine.KVStore); !ok {
		return fmt.Errorf("kv-insert: the cluster (%T) takes neither SQL nor key-value puts", env.Cluster)
	}
	cs := make([]engine.KVClient, env.Users)
	for i := range cs {
		c, err := env.KVClient(ctx, i) // journalled with verification on
		if err != nil {
			for _, c := range cs[:i] {
				c.Close()
			}
			return fmt.Errorf("user %d: %w", i, err)
		}
		cs[i] = c
	}
	w.kv.mu.Lock()
	w.kv.clients = cs
	w.kv.mu.Unlock()
	return nil
}

// Close implements workload.Connector.
func (w *Workload) Close() error {
	w.kv.mu.Lock()
	cs := w.kv.clients
	w.kv.clients = nil
	w.kv.mu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// put is the insert on a key-value cluster: one record, one transaction.
func (w *Workload) put(ctx context.Context, call workload.OpCall, r *rand.Rand) (int64, error) {
	w.kv.mu.Lock()
	var c engine.KVClient
	if call.User < len(w.kv.clients) {
		c = w.kv.clients[call.User]
	}
	w.kv.mu.Unlock()
	if c == nil {
		return 0, errors.New("kv-insert: not connected")
	}
	k := w.key(r)
	rec := []engine.KVRecord{{Key: k, Value: fill(r, make([]byte, w.valueBytes))}}
	if _, err := c.Put(ctx, rec, engine.KVStamp{Writer: call.User, Seq: call.Seq, Sending: call.Sending}); err != nil {
		return 0, fmt.Errorf("insert key %x: %w", k, err)
	}
	return 1, nil
}
