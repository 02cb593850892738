package workload_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"replab/internal/engine"
	"replab/internal/workload"
	"replab/internal/workload/workloadtest"
)

// TestOpJournal: a client made through ConnectEnv.KVClient puts the
// journal's key (writer base + user, seq from 1) into each put's
// transaction and keeps each put's outcome: acknowledged without an error,
// nothing for a refusal before the commit (engine.ErrNotCommitted),
// unknown for any other error — such a put may have committed.
func TestOpJournal(t *testing.T) {
	kv := workloadtest.NewMemKV("m")
	kv.PutHook = func(n int) (bool, error) {
		switch n {
		case 2:
			return false, fmt.Errorf("refused: %w", engine.ErrNotCommitted)
		case 3:
			return true, errors.New("connection reset") // landed, unacknowledged
		case 4:
			return false, errors.New("timeout") // lost on the way
		}
		return true, nil
	}
	j := workload.NewOpAcks(2, 500)
	env := workload.ConnectEnv{Cluster: kv, Users: 2, Acks: j}
	ctx := context.Background()
	c, err := env.KVClient(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		_, _ = c.Put(ctx, []engine.KVRecord{{Key: []byte{byte(i)}, Value: []byte{1}}}, engine.KVStamp{})
	}
	if !j.Used() {
		t.Error("Used() = false after a journalled client")
	}
	got := map[int][2][]int64{}
	j.Outcomes(func(user int, acked, unknown []int64) { got[user] = [2][]int64{acked, unknown} })
	if want := [2][]int64{{1, 5}, {3, 4}}; !reflect.DeepEqual(got[1], want) {
		t.Errorf("user 1: acked, unknown = %v, want %v", got[1], want)
	}
	if len(got[0][0]) != 0 || len(got[0][1]) != 0 {
		t.Errorf("user 0 journalled %v", got[0])
	}
	present := map[[2]int64]bool{}
	_ = kv.AckKeys(ctx, "m", func(w int, s int64) { present[[2]int64{int64(w), s}] = true })
	if want := map[[2]int64]bool{{501, 1}: true, {501, 3}: true, {501, 5}: true}; !reflect.DeepEqual(present, want) {
		t.Errorf("journal keys stored %v, want %v", present, want)
	}

	// Without a journal (verification off), clients journal nothing.
	plain, err := workload.ConnectEnv{Cluster: kv, Users: 2}.KVClient(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	kv.PutHook = nil
	if _, err := plain.Put(ctx, []engine.KVRecord{{Key: []byte{9}, Value: []byte{1}}}, engine.KVStamp{}); err != nil {
		t.Fatal(err)
	}
	n := 0
	_ = kv.AckKeys(ctx, "m", func(int, int64) { n++ })
	if n != 3 {
		t.Errorf("a put without a journal added a key: %d keys", n)
	}
	var nilJ *workload.OpAcks
	if nilJ.Used() {
		t.Error("a nil journal says it was used")
	}
}
