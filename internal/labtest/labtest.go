// Package labtest brings up labs and clusters of any engine for
// integration tests: it skips a test when the machine cannot run it, gives
// each lab a unique name and private state and data roots, and removes
// everything when the test ends. It is a normal package so that tests in
// several packages can share it, but only tests import it. It knows no
// engine: each engine's own test package (postgres/pgtest, …) adds what
// that engine needs.
package labtest

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/lab"
	"replab/internal/spec"
	"replab/internal/testkit"
)

// upTimeout bounds bringing up a lab and its cluster.
const upTimeout = 3 * time.Minute

// UniqueName is a lab name no other test or test run uses at the same time:
// prefix-<pid mod 10000>-<3 random hex digits>. Lab names have at most 20
// characters, so prefix should have at most 10.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%03x", prefix, os.Getpid()%10000, rand.IntN(0x1000))
}

// Lab brings up the lab of spec text whose [lab] section says
// name = "NAME"; the lab is named UniqueName(prefix), keeps its state and
// data in the test's temporary directories, and is closed when the test
// ends. It skips t unless the machine can build labs (testkit.Lab).
func Lab(t testing.TB, prefix, specText string) *lab.Lab {
	t.Helper()
	testkit.Need(t, testkit.Lab)
	l, _ := up(t, prefix, specText)
	return l
}

// Cluster is Lab with e's cluster on the lab's nodes (after testkit.Need(t, testkit.Lab);
// the caller checks what e itself needs). The spec is validated by e first.
// The cluster is closed before the lab when the test ends, and the test
// fails if a server of it is still running then. The engine's log goes to
// stderr with -v.
func Cluster(t testing.TB, e engine.Engine, prefix, specText string) (*lab.Lab, engine.Cluster) {
	t.Helper()
	var log io.Writer = io.Discard
	if testing.Verbose() {
		log = os.Stderr
	}
	return ClusterLog(t, e, prefix, specText, log)
}

// ClusterLog is Cluster with the engine's log going to log.
func ClusterLog(t testing.TB, e engine.Engine, prefix, specText string, log io.Writer) (*lab.Lab, engine.Cluster) {
	t.Helper()
	testkit.Need(t, testkit.Lab)
	l, dataRoot := up(t, prefix, specText)
	if err := e.Validate(l.Spec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	c, err := e.Up(ctx, l, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		// Servers run with their data under the lab's data root; so do
		// the nodes' storage processes, which go with the lab.
		storage := map[string]bool{}
		for _, p := range l.StorageProcesses() {
			storage[strconv.Itoa(p.PID)] = true
		}
		out, _ := exec.Command("ps", "-eo", "pid,args").Output()
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && storage[f[0]] {
				continue
			}
			if strings.Contains(line, dataRoot) {
				t.Errorf("server left behind after Close: %s", strings.TrimSpace(line))
			}
		}
	})
	return l, c
}

func up(t testing.TB, prefix, specText string) (*lab.Lab, string) {
	t.Helper()
	const placeholder = `name = "NAME"`
	if !strings.Contains(specText, placeholder) {
		t.Fatalf("labtest: spec text has no %s", placeholder)
	}
	text := strings.Replace(specText, placeholder, fmt.Sprintf("name = %q", UniqueName(prefix)), 1)
	s, err := spec.Parse(prefix+".toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	dataRoot := t.TempDir()
	l, err := lab.Up(ctx, s, lab.Options{StateRoot: t.TempDir(), DataRoot: dataRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
		out, _ := exec.Command("ip", "netns", "list").Output()
		if strings.Contains(string(out), s.Lab.Name+".") {
			t.Errorf("namespaces of lab %s left behind: %s", s.Lab.Name, out)
		}
	})
	return l, dataRoot
}
