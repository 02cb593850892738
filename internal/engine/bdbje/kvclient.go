package bdbje

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// defaultReadTimeout bounds a replica's wait for a read's consistency
// policy when the read names none.
const defaultReadTimeout = 5 * time.Second

// KVClient implements engine.KVStore.
func (c *cluster) KVClient(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (engine.KVClient, error) {
	k := &kvClient{c: c, dial: dial, at: map[string]*conn{}}
	if err := k.connect(ctx); err != nil {
		return nil, err
	}
	return k, nil
}

// kvClient follows the master: a put (or a read at the master) refused by
// a node that is no longer master (nothing committed) finds the new one
// and is sent there. Reads at a named node use a connection of their own
// to it. The client keeps the CommitToken of its last acknowledged put,
// for reads with engine.KVCommitPoint.
type kvClient struct {
	c      *cluster
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	cn     *conn  // to the master
	master string // cn's node
	at     map[string]*conn
	token  []byte
}

func (k *kvClient) connect(ctx context.Context) error {
	m, err := k.c.findMaster(ctx, masterWait)
	if err != nil {
		return err
	}
	cn, err := dial(ctx, k.dial, m.client.String())
	if err != nil {
		return fmt.Errorf("connect to master %s: %w", m.Name, err)
	}
	k.cn, k.master = cn, m.Name
	return nil
}

func (k *kvClient) drop() {
	if k.cn != nil {
		k.cn.Close()
		k.cn = nil
	}
}

// Put implements engine.KVClient.
func (k *kvClient) Put(ctx context.Context, recs []engine.KVRecord, stamp engine.KVStamp) (engine.KVCommit, error) {
	req := insertReq{recs: recs, writer: -1, jwriter: stamp.AckWriter, ackSeq: stamp.AckSeq}
	if stamp.Seq > 0 {
		req.writer, req.seq = stamp.Writer, stamp.Seq
	}
	for attempt := 0; ; attempt++ {
		if k.cn == nil {
			if err := k.connect(ctx); err != nil {
				return engine.KVCommit{}, fmt.Errorf("%w: %w", engine.ErrNotCommitted, err) // never sent
			}
		}
		commit := engine.KVCommit{Node: k.master}
		vlsn, token, err := k.cn.insert(ctx, req, stamp.Sending)
		if err == nil {
			commit.Position = vlsn
			k.token = token
			return commit, nil
		}
		var e *Error
		if !errors.As(err, &e) {
			k.drop() // the connection broke: the outcome is unknown
			return commit, err
		}
		if (e.Code == codeReplica || e.Code == codeUnknownMaster) && attempt == 0 {
			k.drop() // refused before anything committed: to the new master
			continue
		}
		return commit, err
	}
}

// Get implements engine.KVClient.
func (k *kvClient) Get(ctx context.Context, keys [][]byte, read engine.KVRead) (engine.KVValues, error) {
	req := readReq{keys: keys, timeout: read.Timeout, policy: policyNone}
	if req.timeout <= 0 {
		req.timeout = defaultReadTimeout
	}
	switch read.Consistency {
	case "", engine.KVNone:
	case engine.KVTime:
		req.policy, req.maxLag = policyTime, read.MaxLag
	case engine.KVCommitPoint:
		req.policy, req.token = policyCommit, k.token
	default:
		return engine.KVValues{}, fmt.Errorf("bdbje: unknown consistency policy %q (none, time, commit)", read.Consistency)
	}
	if read.Node == "" {
		return k.getAtMaster(ctx, req)
	}
	n := k.c.byName[read.Node]
	if n == nil {
		return engine.KVValues{}, enginekit.NoSuchNode(read.Node, k.c.Nodes())
	}
	cn := k.at[n.Name]
	if cn == nil {
		var err error
		if cn, err = dial(ctx, k.dial, n.client.String()); err != nil {
			return engine.KVValues{Node: n.Name}, fmt.Errorf("connect to node %s: %w", n.Name, err)
		}
		k.at[n.Name] = cn
	}
	vals, err := cn.read(ctx, req)
	var e *Error
	if err != nil && !errors.As(err, &e) {
		cn.Close() // broken: the next read connects again
		delete(k.at, n.Name)
	}
	return engine.KVValues{Node: n.Name, Values: vals}, err
}

// getAtMaster reads at the master, following it as Put does.
func (k *kvClient) getAtMaster(ctx context.Context, req readReq) (engine.KVValues, error) {
	req.masterOnly = true
	for attempt := 0; ; attempt++ {
		if k.cn == nil {
			if err := k.connect(ctx); err != nil {
				return engine.KVValues{}, err
			}
		}
		vals, err := k.cn.read(ctx, req)
		if err == nil {
			return engine.KVValues{Node: k.master, Values: vals}, nil
		}
		var e *Error
		if !errors.As(err, &e) {
			k.drop()
			return engine.KVValues{Node: k.master}, err
		}
		if (e.Code == codeReplica || e.Code == codeUnknownMaster) && attempt == 0 {
			k.drop()
			continue
		}
		return engine.KVValues{Node: k.master}, err
	}
}

// Close implements engine.KVClient.
func (k *kvClient) Close() error {
	k.drop()
	for name, cn := range k.at {
		cn.Close()
		delete(k.at, name)
	}
	return nil
}

// AckKeys implements engine.KVAcks: the keys at node, read from
// its own site.
func (c *cluster) AckKeys(ctx context.Context, node string, f func(writer int, seq int64)) error {
	n := c.byName[node]
	if n == nil {
		return enginekit.NoSuchNode(node, c.Nodes())
	}
	if n.pid() == 0 {
		return fmt.Errorf("node %s is down", node)
	}
	cn, err := n.dialFromSite(ctx)
	if err != nil {
		return fmt.Errorf("node %s: %w", node, err)
	}
	defer cn.Close()
	return cn.journalEach(ctx, f)
}
