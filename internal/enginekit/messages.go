package enginekit

import (
	"fmt"
	"strings"

	"replab/internal/engine"
)

// Pieces of error messages that every engine writes the same way.

// NoSuchNode is the error for a node name the cluster does not have,
// listing the ones it has.
func NoSuchNode(name string, nodes []engine.Node) error {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return fmt.Errorf("no node %q; nodes: %s", name, strings.Join(names, ", "))
}

// LastLines is s's last n lines joined with " | ": a server's log or a
// tool's output, short enough for an error message.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// FirstWords shortens a statement for an error message: its first four
// words, whitespace collapsed, at most 60 characters.
func FirstWords(q string) string {
	f := strings.Fields(q)
	s := strings.Join(f[:min(len(f), 4)], " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}
