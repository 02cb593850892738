package bdbje

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/labtest"
	"replab/internal/spec"
	"replab/internal/testkit"
)

// threeSpec is a group of three electable nodes in three sites joined by
// 5 ms links, acknowledging by simple majority.
var threeSpec = testkit.ReadFile("testdata/three.toml")

func requireJava(t *testing.T) {
	t.Helper()
	testkit.Need(t, testkit.Lab, testkit.Java)
}

func put(ctx context.Context, k engine.KVClient, i int, stamp engine.KVStamp) error {
	key := []byte(fmt.Sprintf("key-%06d", i))
	_, err := k.Put(ctx, []engine.KVRecord{{Key: key, Value: bytes.Repeat([]byte{byte(i)}, 100)}}, stamp)
	return err
}

// TestGroupOfThree: the group forms with n1 as master and the others
// replicating; a put carries its lag stamp to every replica; with simple
// majority acks, puts go on with one replica cut off and fail with a clear
// error — not hang — with both cut off; after the links heal every copy
// agrees; the master's kill -9 elects another, which the client follows;
// the killed node rejoins as a replica and catches up.
func TestGroupOfThree(t *testing.T) {
	t.Parallel()
	requireJava(t)
	l, c := labtest.Cluster(t, Engine{}, "jegrp", threeSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	nodes := c.Nodes()
	if len(nodes) != 3 || !nodes[0].Writable || nodes[1].Writable || nodes[2].Writable ||
		len(nodes[1].Upstreams) != 1 || nodes[1].Upstreams[0] != "n1" || nodes[0].Version != JEVersion {
		t.Fatalf("nodes: %+v", nodes)
	}
	procs, err := c.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]map[string]int{}
	for _, p := range procs {
		if roles[p.Node] == nil {
			roles[p.Node] = map[string]int{}
		}
		roles[p.Node][p.Role]++
	}
	if roles["n1"][roleFeeder] == 0 || roles["n2"][roleReplay] == 0 || roles["n3"][roleReplay] == 0 {
		t.Errorf("thread roles: %v", roles)
	}

	k, err := c.(engine.KVStore).KVClient(ctx, l.Site("a").DialContext)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	stamps := c.(engine.LagStamps)
	if err := stamps.ResetLag(ctx, 2); err != nil {
		t.Fatal(err)
	}
	sent := false
	if err := put(ctx, k, 0, engine.KVStamp{Writer: 1, Seq: 7, Sending: func() { sent = true }}); err != nil {
		t.Fatal(err)
	}
	if !sent {
		t.Error("Put did not call Sending")
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n2", "n3"} {
		lr, err := stamps.LagReader(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		pos := []int64{-1, -1}
		if err := lr.Positions(ctx, pos); err != nil {
			t.Fatal(err)
		}
		lr.Close()
		if pos[0] != 0 || pos[1] != 7 {
			t.Errorf("node %s: stamps %v, want [0 7]", n, pos)
		}
	}

	// One replica cut off: the other one's acknowledgement is a majority.
	if err := l.SetLink("a", "c", true, []string{"down"}); err != nil {
		t.Fatal(err)
	}
	if err := l.SetLink("b", "c", true, []string{"down"}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		if err := put(ctx, k, i, engine.KVStamp{}); err != nil {
			t.Fatalf("put %d with n3 cut off: %v", i, err)
		}
	}
	// Both cut off: no majority acknowledges; the put fails within the
	// ack timeout (or JE refuses to begin it), with the node's reason.
	if err := l.SetLink("a", "b", true, []string{"down"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = put(ctx, k, 21, engine.KVStamp{})
	took := time.Since(start)
	if !IsCode(err, codeInsufficientAcks) && !IsCode(err, codeInsufficientReplicas) {
		t.Fatalf("a put with both replicas cut off: %v after %s, want insufficient-acks or insufficient-replicas", err, took)
	}
	if cl := c.(engine.ErrorClassifier).Classify(err); cl.Code == "" || cl.Retry {
		t.Errorf("classified %+v", cl)
	}
	t.Logf("both replicas cut off: %v after %s", err, took.Round(time.Millisecond))
	for _, pair := range [][2]string{{"a", "b"}, {"a", "c"}, {"b", "c"}} {
		if err := l.SetLink(pair[0], pair[1], true, []string{"up"}); err != nil {
			t.Fatal(err)
		}
	}
	// The group may have held an election while cut off: the client
	// finds whichever node is master now.
	for i := 22; i <= 30; i++ {
		putEventually(ctx, t, k, i, "after healing")
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(ctx, t, c, 3)

	// kill -9 of the master: the other two elect one of themselves.
	old := masterOf(t, c)
	if err := c.(engine.NodeControl).Kill(ctx, old); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	// The client's connection to the killed master breaks: that put
	// fails (its outcome unknown to the client); the next finds the new
	// master.
	var e *Error
	if err := put(ctx, k, 31, engine.KVStamp{}); err != nil && errors.As(err, &e) {
		t.Fatalf("the put on the killed master's connection: %v, want a broken connection", err)
	}
	for i := 32; i <= 40; i++ {
		putEventually(ctx, t, k, i, "after the master's kill")
	}
	t.Logf("first put after killing master %s: %s", old, time.Since(start).Round(time.Millisecond))
	if m := masterOf(t, c); m == old {
		t.Fatalf("master still %s after its kill", m)
	}
	if err := c.(engine.NodeControl).Start(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatal(err)
	}
	agree(ctx, t, c, 3)
}

// putEventually puts record i until it is acknowledged. Right after an
// election or a heal the replicas first sync up with the master, and until
// one has, a commit can miss its acknowledgement (insufficient-acks: it
// committed at the master, and the retry overwrites it) or find too few
// replicas; a put that broke with its connection is sent again too. Any
// other error, or no acknowledged put within a minute, fails the test.
func putEventually(ctx context.Context, t *testing.T, k engine.KVClient, i int, when string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := put(ctx, k, i, engine.KVStamp{})
		if err == nil {
			return
		}
		var e *Error
		transient := !errors.As(err, &e) || e.Code == codeInsufficientAcks || e.Code == codeInsufficientReplicas ||
			e.Code == codeUnknownMaster || e.Code == codeReplica
		if !transient || time.Now().After(deadline) {
			t.Fatalf("put %d %s: %v", i, when, err)
		}
		t.Logf("put %d %s: %v; again", i, when, strings.SplitN(err.Error(), "\n", 2)[0])
	}
}

// masterOf is the node the cluster sees as master.
func masterOf(t *testing.T, c engine.Cluster) string {
	t.Helper()
	var m []string
	for _, n := range c.Nodes() {
		if n.Writable {
			m = append(m, n.Name)
		}
	}
	if len(m) != 1 {
		t.Fatalf("masters: %v", m)
	}
	return m[0]
}

// agree checks that want nodes hold the same records.
func agree(ctx context.Context, t *testing.T, c engine.Cluster, want int) {
	t.Helper()
	sums, err := c.(engine.Checksummer).Checksums(ctx, "kv")
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != want {
		t.Fatalf("checksums of %d nodes, want %d: %v", len(sums), want, sums)
	}
	if d := engine.Diverged(sums); len(d) > 0 {
		t.Fatalf("copies differ: %+v", d)
	}
}

// A node that cannot start (a JE parameter JE refuses) fails Up with the
// node's own words, and leaves no JVM behind.
func TestFailedStartLeavesNothing(t *testing.T) {
	t.Parallel()
	requireJava(t)
	bad := strings.Replace(threeSpec, "[node.n2]\nsite = \"b\"\nrole = \"electable\"\n",
		"[node.n2]\nsite = \"b\"\nrole = \"electable\"\n[node.n2.settings]\n\"je.rep.noSuchParameter\" = \"1\"\n", 1)
	l := labtest.Lab(t, "jebad", bad)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Engine{}.Up(ctx, l, os.Stderr)
	if err == nil {
		c.Close()
		t.Fatal("Up passed with a parameter JE does not know")
	}
	t.Logf("Up: %v", err)
	if !strings.Contains(err.Error(), "n2") || !strings.Contains(err.Error(), "noSuchParameter") {
		t.Errorf("the error does not name the node and the parameter: %v", err)
	}
	if out, _ := exec.Command("pgrep", "-f", "ReplabNode.*"+l.Spec.Lab.Name).CombinedOutput(); len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("JVMs left behind: %s", out)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"role", "[node.n3]\nsite = \"c\"\nrole = \"electable\"", "[node.n3]\nsite = \"c\"\nrole = \"master\"", `three.toml:26: node.n3.role: unknown role "master" for engine bdbje`},
		{"first secondary", "[node.n1]\nsite = \"a\"\nrole = \"electable\"", "[node.n1]\nsite = \"a\"\nrole = \"secondary\"", "node.n1.role: the first node founds the group"},
		{"from", "[node.n3]\nsite = \"c\"\n", "[node.n3]\nsite = \"c\"\nfrom = \"n1\"\n", "node.n3.from: JE nodes replicate from the master the group elects"},
		{"replication", "[scheme]\n", "[scheme]\nreplication = \"async\"\n", `scheme.replication: unknown replication "async" for engine bdbje`},
		{"sync", `local_sync = "no_sync"`, `local_sync = "fsync"`, `scheme.local_sync:`},
		{"ack", `ack = "majority"`, `ack = "quorum"`, `scheme.ack:`},
		{"timeout", `ack_timeout = "2s"`, `ack_timeout = "1us"`, `scheme.ack_timeout:`},
		{"cache", `heap = "192MiB"`, "heap = \"192MiB\"\ncache_size = \"256MiB\"", "scheme.cache_size: cache_size (256 MiB) must be smaller than the heap"},
		{"setting", "[node.n3]\nsite = \"c\"\nrole = \"electable\"\n", "[node.n3]\nsite = \"c\"\nrole = \"electable\"\n[node.n3.settings]\nmax_connections = \"5\"\n", `setting "max_connections" is not a JE parameter`},
		{"unknown", `ack = "majority"`, `acks = "majority"`, "scheme.acks: unknown option for engine bdbje"},
		{"jit", `heap = "192MiB"`, "heap = \"192MiB\"\njit = \"c2\"", `scheme.jit`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(threeSpec, c.from) {
				t.Fatalf("the spec has no %q", c.from)
			}
			text := strings.Replace(strings.Replace(threeSpec, c.from, c.to, 1), "NAME", "v", 1)
			s, err := spec.Parse("three.toml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			err = Engine{}.Validate(s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	s, err := spec.Parse("three.toml", []byte(strings.Replace(threeSpec, "NAME", "v", 1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := makePlan(s)
	if err != nil {
		t.Fatalf("a good spec: %v", err)
	}
	if got := p.durability(); got != "NO_SYNC,NO_SYNC,SIMPLE_MAJORITY" {
		t.Errorf("durability %q", got)
	}
}

func TestThreadRoles(t *testing.T) {
	for _, c := range []struct {
		comm, role string
		apply      bool
	}{
		{"Feeder Output f", roleFeeder, false},
		{"Feeder Input fo", roleFeeder, false},
		{"ReplayThread", roleReplay, true},
		{"ReplicaOutputTh", roleReplay, true},
		{"REPLICA n2(2)", roleReplay, true},
		{"MASTER n1(1)", roleFeeder, false},
		{"JE Elections Fa", roleElections, false},
		{"Learner Thread ", roleElections, false},
		{"LogFlusher", roleCheckpointer, false},
		{"G1 Conc#0", roleGC, false},
		{"GC Thread#0", roleGC, false},
		{"replab-client-3", roleClient, false},
		{"Cleaner-1", roleCleaner, false},
		{"Checkpointer", roleCheckpointer, false},
		{"VM Thread", roleGC, false},
		{"C2 CompilerThre", roleJIT, false},
		{"java", roleOther, false},
	} {
		role, apply := threadRole(c.comm)
		if role != c.role || apply != c.apply {
			t.Errorf("%q: %s %v, want %s %v", c.comm, role, apply, c.role, c.apply)
		}
	}
}

func TestDecodeError(t *testing.T) {
	err := decodeError(append([]byte{0, 7}, "replicaNot the master"...))
	var e *Error
	if !errors.As(err, &e) || e.Code != "replica" || e.Msg != "Not the master" || !IsCode(err, codeReplica) {
		t.Errorf("got %#v", err)
	}
	if err := decodeError([]byte{0, 9, 'x'}); !IsCode(err, "other") {
		t.Errorf("a short error frame: %v", err)
	}
}
