package bdbje

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/labtest"
)

// readSpec puts the master n1 and n2 in site a, n3 in site c behind a
// 50 ms link of 10 Mbit/s, and the client in site b, 30 ms from each.
// The client is not in a: on one path a read queues behind the change it
// should miss, and routes take the least delay, so only a link that is
// slow to carry a large change (its rate) lets a read overtake it: here a
// 64 KiB put reaches n3 about 100 ms after its commit, while the client
// has its acknowledgement (from n2, beside the master) 30 ms after it and
// its read reaches n3 30 ms later still.
const readSpec = `
[lab]
name = "NAME"
[site.a]
[site.b]
[site.c]
[[link]]
sites = ["a", "c"]
delay = "50ms"
rate = "10mbit"
[[link]]
sites = ["a", "b"]
delay = "30ms"
[[link]]
sites = ["b", "c"]
delay = "30ms"
[engine]
kind = "bdbje"
[node.n1]
site = "a"
role = "electable"
[node.n2]
site = "a"
role = "electable"
[node.n3]
site = "c"
role = "electable"
[scheme]
local_sync = "no_sync"
replica_sync = "no_sync"
ack = "majority"
heap = "128MiB"
`

// TestReadConsistencyAtAReplica: a client's reads at a replica right after
// its own acknowledged put (read-your-writes), under each consistency
// policy. "none" reads whatever n3 has: older than the client's last write
// here; "commit" waits until n3 has replayed that put's commit point, so
// no read is ever older than the client's last write; "time:100ms" waits
// until n3 is at most 100 ms behind (both may happen: counted, not
// asserted). Reads at the master see the last write; a key never written
// is absent; each put's VLSN is above the last.
func TestReadConsistencyAtAReplica(t *testing.T) {
	t.Parallel()
	requireJava(t)
	l, c := labtest.Cluster(t, Engine{}, "jeread", readSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := c.(engine.KVStore).KVClient(ctx, l.Site("b").DialContext)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()

	key := []byte("ryw")
	pad := make([]byte, 64<<10)
	var seq, lastVLSN int64
	write := func() {
		t.Helper()
		seq++
		val := append(binary.BigEndian.AppendUint64(nil, uint64(seq)), pad...)
		commit, err := k.Put(ctx, []engine.KVRecord{{Key: key, Value: val}}, engine.KVStamp{})
		if err != nil {
			t.Fatalf("put %d: %v", seq, err)
		}
		if commit.Node != "n1" || commit.Position <= lastVLSN {
			t.Fatalf("put %d: commit %+v after VLSN %d", seq, commit, lastVLSN)
		}
		lastVLSN = commit.Position
	}
	read := func(at engine.KVRead) (int64, error) {
		t.Helper()
		got, err := k.Get(ctx, [][]byte{key, []byte("never-written")}, at)
		if err != nil {
			return 0, err
		}
		if got.Values[1] != nil {
			t.Errorf("a key never written read as %q", got.Values[1])
		}
		if want := at.Node; want != "" && got.Node != want {
			t.Errorf("read at %q answered by %q", want, got.Node)
		}
		if got.Values[0] == nil {
			return 0, nil
		}
		if len(got.Values[0]) != 8+len(pad) {
			t.Fatalf("value of %d bytes", len(got.Values[0]))
		}
		return int64(binary.BigEndian.Uint64(got.Values[0])), nil
	}

	write()
	if v, err := read(engine.KVRead{}); err != nil || v != seq {
		t.Fatalf("read at the master: %d, %v; want %d", v, err, seq)
	}
	const rounds = 8
	stale := map[engine.KVConsistency]int{}
	for _, at := range []engine.KVRead{
		{Node: "n3", Consistency: engine.KVNone},
		{Node: "n3", Consistency: engine.KVCommitPoint},
		{Node: "n3", Consistency: engine.KVTime, MaxLag: 100 * time.Millisecond},
	} {
		failed := 0
		for range rounds {
			write()
			start := time.Now()
			v, err := read(at)
			switch {
			case IsCode(err, codeConsistency) && at.Consistency == engine.KVTime:
				failed++ // could not get within the bound in time: allowed
			case err != nil:
				t.Fatalf("read at n3 with %s: %v", at.Consistency, err)
			case v > seq:
				t.Fatalf("read %d before it was written (last %d)", v, seq)
			case v < seq:
				stale[at.Consistency]++
			}
			t.Logf("%s: wrote %d, read %d after %s", at.Consistency, seq, v, time.Since(start).Round(time.Millisecond))
		}
		t.Logf("consistency %s: %d of %d reads older than the client's last write, %d failed", at.Consistency, stale[at.Consistency], rounds, failed)
	}
	if stale[engine.KVNone] == 0 {
		t.Errorf("with consistency none no read at n3 was older than the write just acknowledged")
	}
	if n := stale[engine.KVCommitPoint]; n > 0 {
		t.Errorf("with consistency commit %d reads at n3 were older than the client's own last write", n)
	}

	// A read at the master of a node that is not master is refused, and
	// the client finds the master instead.
	if _, err := k.Get(ctx, [][]byte{key}, engine.KVRead{Consistency: "strong"}); err == nil {
		t.Error("an unknown consistency policy was accepted")
	}
	var e *Error
	if _, err := k.Get(ctx, [][]byte{key}, engine.KVRead{Node: "n9"}); err == nil || errors.As(err, &e) {
		t.Errorf("a read at an unknown node: %v", err)
	}
}
