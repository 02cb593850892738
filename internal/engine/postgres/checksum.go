package postgres

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"replab/internal/enginekit"
)

// Checksums (engine.Checksummer): after a run the runner compares every
// full copy of the workload's tables.
//
// A table's checksum is the sum, modulo 2^64, of a 64-bit hash of each of
// its rows: the first 16 hex digits of md5 of the row's text (the row as
// a composite value, every column in table order). A sum does not depend
// on the order rows are read in, so a standby (the primary's pages, byte
// for byte) and a logical replica or another master (rows in whatever
// order they arrived) compare equal when they hold the same rows; a value
// moved or swapped between two rows changes both rows' texts, and so the
// sum, but for a chance of 2^-64. Every row is read and hashed once, no
// sort: about a second per million small rows. The text of a row depends
// on a few session settings (time zone, date and interval styles, float
// digits, bytea output); each node's session sets them the same.

// skipChecksum are replab's own tables, left out when Checksums is given
// no table names: the engine's markers (written by WaitFlowing), the lag
// probe's stamps and the acknowledged-commits journal (the runner checks it
// itself).
var skipChecksum = []string{"replab_marker", enginekit.LagTableName, enginekit.AckTableName}

// checksumSession makes a row's text the same at every node whatever the
// servers' defaults.
const checksumSession = `SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres';
SET extra_float_digits = 1; SET bytea_output = 'hex'`

// checksumSQL sums a 64-bit hash of every row of table, as numeric text
// (sum over bigint does not overflow; foldSum wraps it to 64 bits).
func checksumSQL(table string) string {
	return "SELECT coalesce(sum(('x' || left(md5(replab_row::text), 16))::bit(64)::bigint), 0)::text FROM " +
		pgx.Identifier{table}.Sanitize() + " AS replab_row"
}

// twoTo64 is 2^64.
var twoTo64 = new(big.Int).Lsh(big.NewInt(1), 64)

// foldSum wraps a decimal sum to 64 bits, as an int64.
func foldSum(s string) (int64, error) {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return 0, fmt.Errorf("checksum %q is not an integer", s)
	}
	return int64(v.Mod(v, twoTo64).Uint64()), nil
}

// Checksums implements engine.Checksummer: node -> table -> checksum, for
// tables (every table of the replab database's public schema but replab's
// own when none are given), at every node holding a full copy:
//
//   - the primary, or every master of replication = "multimaster";
//   - every physical standby (asynchronous, synchronous, cascading,
//     delayed: a delayed standby agrees once WaitFlowing's marker has
//     been replayed there);
//   - logical and snapshot replicas without [[node.NAME.table]] filters:
//     a replica with any filter (a table list, a row filter or a column
//     list) holds a partial copy and is left out. A snapshot replica holds
//     the primary's rows as of its last refresh, so it agrees only after a
//     refresh that followed the last write (WaitFlowing does one, and the
//     runner calls it first).
//
// Nodes that are not running, and a primary that was failed over from,
// are left out. A table missing at a node is missing from its map
// (engine.Diverged reports it). Each node is read in one REPEATABLE READ
// transaction, so its tables come from one snapshot; nodes are read in
// parallel.
func (c *cluster) Checksums(ctx context.Context, tables ...string) (map[string]map[string]int64, error) {
	if c.sinks != nil {
		return c.sinkChecksums(ctx, tables)
	}
	c.topo.RLock()
	var nodes []*node
	for _, n := range c.nodes {
		if n.failedOver || n.pid() == 0 || (n.Role == "replica" && len(n.Tables) > 0) {
			continue
		}
		nodes = append(nodes, n)
	}
	c.topo.RUnlock()
	out := make(map[string]map[string]int64, len(nodes))
	var mu sync.Mutex
	err := enginekit.Each(nodes, func(n *node) error {
		s, err := n.checksums(ctx, tables)
		if err != nil {
			return fmt.Errorf("node %s: checksums: %w", n.Name, err)
		}
		mu.Lock()
		out[n.Name] = s
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checksums reads one node's checksums of tables (see Checksums).
func (n *node) checksums(ctx context.Context, tables []string) (map[string]int64, error) {
	conn, err := n.connect(ctx, "")
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, checksumSession); err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.Background())
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname`)
	if err != nil {
		return nil, err
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(tables) == 0 {
		for _, t := range have {
			if !slices.Contains(skipChecksum, t) {
				tables = append(tables, t)
			}
		}
	}
	out := make(map[string]int64, len(tables))
	for _, t := range tables {
		rel, ok := relName(t, have)
		if !ok {
			continue // missing here: engine.Diverged says so
		}
		var s string
		if err := tx.QueryRow(ctx, checksumSQL(rel)).Scan(&s); err != nil {
			return nil, fmt.Errorf("table %s: %w", t, err)
		}
		if out[t], err = foldSum(s); err != nil {
			return nil, fmt.Errorf("table %s: %w", t, err)
		}
	}
	return out, nil
}

// relName finds a table name among a node's tables: as written, or folded
// to lower case as an unquoted SQL name is.
func relName(table string, have []string) (string, bool) {
	for _, t := range []string{table, strings.ToLower(table)} {
		if slices.Contains(have, t) {
			return t, true
		}
	}
	return "", false
}
