package bdbje

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"replab/internal/engine"
)

// A node is one JVM; its roles are threads, found by the names JE and the
// node program give them (Linux keeps a thread's first 15 bytes in comm).

// Thread roles.
const (
	roleFeeder       = "feeder"       // the master's feeders: one pair of threads per replica
	roleReplay       = "replay"       // a replica receiving and applying the stream
	roleClient       = "client"       // the node program's threads serving replab's clients
	roleElections    = "elections"    // elections: proposer, learner, acceptor
	roleCleaner      = "cleaner"      // log cleaning
	roleCheckpointer = "checkpointer" // checkpoints and the log flusher
	roleGC           = "gc"           // the JVM's garbage collector
	roleJIT          = "jit"          // the JVM's compilers
	roleOther        = "other"        // group service, timers, the JVM's own
)

// threadRole maps a thread's name to its role. JE names the node's main
// thread after its state ("MASTER n1(1)", "REPLICA n2(2)"): a replica's
// receives the stream, a master's runs its feeders.
func threadRole(comm string) (role string, apply bool) {
	switch c := strings.ToLower(comm); {
	case strings.HasPrefix(c, "feeder"), strings.HasPrefix(c, "master "):
		return roleFeeder, false
	case strings.HasPrefix(c, "replay"), strings.HasPrefix(c, "replica"):
		return roleReplay, true
	case strings.HasPrefix(c, "je elections"), strings.HasPrefix(c, "learner"), strings.HasPrefix(c, "acceptor"):
		return roleElections, false
	case strings.HasPrefix(c, "replab-client"):
		return roleClient, false
	case strings.HasPrefix(c, "cleaner"):
		return roleCleaner, false
	case strings.HasPrefix(c, "checkpointer"), strings.HasPrefix(c, "logflusher"):
		return roleCheckpointer, false
	case strings.HasPrefix(c, "gc "), strings.HasPrefix(c, "g1 "), c == "vm thread":
		return roleGC, false
	case strings.HasPrefix(c, "c1 compiler"), strings.HasPrefix(c, "c2 compiler"):
		return roleJIT, false
	}
	return roleOther, false
}

// Processes implements engine.Cluster: every thread of every running JVM,
// with its role.
func (c *cluster) Processes(ctx context.Context) ([]engine.Process, error) {
	var out []engine.Process
	for _, n := range c.nodes {
		pid := n.pid()
		if pid == 0 {
			continue
		}
		dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue // exited meanwhile
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			comm, err := os.ReadFile(filepath.Join(dir, t.Name(), "comm"))
			if err != nil {
				continue
			}
			role, apply := threadRole(strings.TrimSpace(string(comm)))
			out = append(out, engine.Process{Node: n.Name, Role: role, PID: pid, TID: tid, Apply: apply})
		}
	}
	return out, nil
}
