package postgres

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"replab/internal/engine"
)

var _ engine.ConflictCounter = (*cluster)(nil)

// pglogical keeps no count of its conflicts: its apply worker logs each
// one it resolves ("CONFLICT: remote UPDATE on relation … Resolution:
// apply_remote."), at pglogical.conflict_log_level, which multi-master
// sets to warning so that it passes log_min_messages. The count is the
// lines in the master's server log, which every start of the node
// appends to: it never goes back. pglogical's conflict is any incoming
// change to a row whose version came from another origin, concurrent or
// not (pglogical_apply_heap.c): an upper bound of true conflicts.
const pglogicalConflict = "CONFLICT: remote "

// ConflictsCounted implements engine.ConflictCounter: multi-master
// (pglogical) counts the conflicts its apply workers resolved; the other
// schemes have one writer.
func (c *cluster) ConflictsCounted() string {
	if c.plan.replication == Multimaster {
		return "pglogical conflicts resolved as " + c.plan.conflict + " (\"" + strings.TrimSpace(pglogicalConflict) + "\" in the server log: remote changes to rows last changed by another origin, concurrent or not)"
	}
	return ""
}

// ReplicationConflicts implements engine.ConflictCounter: per master, the
// conflicts its apply workers logged so far.
func (c *cluster) ReplicationConflicts(ctx context.Context) (map[string]int64, error) {
	if c.plan.replication != Multimaster {
		return nil, nil
	}
	out := map[string]int64{}
	for _, n := range c.masters() {
		k, err := countLines(n.logPath, pglogicalConflict)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		out[n.Name] = k
	}
	return out, ctx.Err()
}

// countLines counts the lines of the file at path that contain s; a file
// that does not exist has none.
func countLines(path, s string) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var k int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			k++
		}
	}
	return k, sc.Err()
}
