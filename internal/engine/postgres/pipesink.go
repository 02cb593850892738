package postgres

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// The pipeline's MariaDB sinks ([scheme] target = "mariadb"): every
// replica is a MariaDB server, started by this cluster in the replica's
// site through the mariadb engine's engine.SinkRunner (found in the
// registry: this package does not import that one), and the replicats
// apply the trail to it, PostgreSQL to MariaDB, as heterogeneous pipelines
// do. The replicas keep their place in c.nodes (names, sites, roles) but
// run no PostgreSQL; the methods below send what concerns them to the
// MariaDB servers.

// The replicas' engines ([scheme] target).
const (
	sinkPostgres = "postgres"
	sinkMariaDB  = "mariadb"
)

// sinkMarkerDDL is replab_marker at a MariaDB sink. The pipeline carries
// PostgreSQL's text of the source's timestamptz, which a DATETIME would
// refuse: the time stays text.
const sinkMarkerDDL = `CREATE TABLE IF NOT EXISTS replab_marker (source VARCHAR(64) PRIMARY KEY, seq BIGINT NOT NULL,
	at VARCHAR(64) NOT NULL) ENGINE=InnoDB`

// isSink says whether node is one of the pipeline's MariaDB sinks.
func (c *cluster) isSink(node string) bool { return c.sinks != nil && c.sinkNodes[node] }

// startSinks starts the replicas as MariaDB servers.
func (c *cluster) startSinks(ctx context.Context) error {
	var names []string
	for _, r := range c.replicas() {
		names = append(names, r.Name)
	}
	var runner engine.SinkRunner
	if c.engines != nil {
		e, _ := c.engines(sinkMariaDB)
		runner, _ = e.(engine.SinkRunner)
	}
	if runner == nil {
		return fmt.Errorf("pipeline: the MariaDB sinks: this replab has no %s engine that runs servers for another's scheme (engine.SinkRunner)", sinkMariaDB)
	}
	sinks, err := runner.StartSinks(ctx, c.lab, names, c.log)
	if err != nil {
		return fmt.Errorf("pipeline: the MariaDB sinks: %w", err)
	}
	c.sinks, c.sinkNodes = sinks, map[string]bool{}
	for _, n := range names {
		c.sinkNodes[n] = true
	}
	return enginekit.Each(names, func(name string) error { return sinks.Exec(ctx, name, sinkMarkerDDL) })
}

// createSinkTables runs a schema's MySQL statements at a MariaDB sink.
func (c *cluster) createSinkTables(ctx context.Context, node string, s engine.Schema) error {
	for _, t := range s.Tables {
		ddl, ok := t.Create[engine.MySQL]
		if !ok {
			return fmt.Errorf("node %s: table %s has no MySQL definition, which a MariaDB sink (target = \"mariadb\") needs: use a workload that has one (dml-stream, kv-insert, personnel)", node, t.Name)
		}
		if err := c.sinks.Exec(ctx, node, ddl); err != nil {
			return fmt.Errorf("node %s: %w", node, err)
		}
		for _, ix := range t.Indexes[engine.MySQL] {
			if err := c.sinks.Exec(ctx, node, ix); err != nil {
				return fmt.Errorf("node %s: %w", node, err)
			}
		}
	}
	return nil
}

// sinkChecksums compares the primary with its MariaDB sinks, which no
// engine's own checksum can: every node's rows are read in primary-key
// order as text and hashed here (FNV-1a over each value, length-prefixed,
// NULL marked). Values whose text differs between the two engines
// (booleans, timestamps with time zones, …) count as differences; the
// workloads' integers and text do not.
func (c *cluster) sinkChecksums(ctx context.Context, tables []string) (map[string]map[string]int64, error) {
	primary := c.byName[c.plan.primaries[0]]
	if primary.pid() == 0 {
		return nil, fmt.Errorf("node %s is not running", primary.Name)
	}
	pg, err := c.Open(ctx, primary.Name, primary.Site)
	if err != nil {
		return nil, err
	}
	defer pg.Close()
	if len(tables) == 0 {
		rows, err := pg.QueryContext(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
			WHERE s.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname`)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var t string
			if err := rows.Scan(&t); err != nil {
				rows.Close()
				return nil, err
			}
			if !slices.Contains(skipChecksum, t) {
				tables = append(tables, t)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	// The columns and key as the primary has them, the same names at the
	// sinks (their DDL is the workload's MySQL version of the table).
	type shape struct{ cols, key []string }
	shapes := map[string]shape{}
	for _, t := range tables {
		var sh shape
		err := pg.QueryRowContext(ctx, `SELECT
			(SELECT array_to_string(array_agg(attname::text ORDER BY attnum), ',') FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped),
			(SELECT array_to_string(array_agg(a.attname::text ORDER BY k.ord), ',') FROM pg_index i
				CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
				JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
				WHERE i.indrelid = $1::regclass AND i.indisprimary)`, t).Scan(scanList(&sh.cols), scanList(&sh.key))
		if err != nil {
			return nil, fmt.Errorf("node %s: table %s: %w", primary.Name, t, err)
		}
		shapes[t] = sh
	}
	out := map[string]map[string]int64{}
	var mu sync.Mutex
	sum := func(node string, db *sql.DB, quote func(string) string) error {
		m := map[string]int64{}
		for _, t := range tables {
			sh := shapes[t]
			q := "SELECT " + quoteAll(sh.cols, quote) + " FROM " + quote(t)
			if len(sh.key) > 0 {
				q += " ORDER BY " + quoteAll(sh.key, quote)
			}
			h, err := hashRows(ctx, db, q, len(sh.cols))
			if err != nil {
				if strings.Contains(err.Error(), "exist") {
					continue // missing here: engine.Diverged reports it
				}
				return fmt.Errorf("node %s: checksum of %s: %w", node, t, err)
			}
			m[t] = h
		}
		mu.Lock()
		out[node] = m
		mu.Unlock()
		return nil
	}
	if err := sum(primary.Name, pg, func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }); err != nil {
		return nil, err
	}
	var running []*node
	for _, r := range c.replicas() {
		if c.isSink(r.Name) && c.sinks.Running(r.Name) {
			running = append(running, r)
		}
	}
	err = enginekit.Each(running, func(r *node) error {
		db, err := c.sinks.Open(ctx, r.Name, r.Site)
		if err != nil {
			return err
		}
		defer db.Close()
		return sum(r.Name, db, func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" })
	})
	return out, err
}

// hashRows hashes the rows q returns, n text columns each.
func hashRows(ctx context.Context, db *sql.DB, q string, n int) (int64, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	vals := make([]sql.NullString, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	h := fnv.New64a()
	var lb [binary.MaxVarintLen64]byte
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return 0, err
		}
		for _, v := range vals {
			if !v.Valid {
				h.Write([]byte{0xff})
				continue
			}
			h.Write(lb[:binary.PutUvarint(lb[:], uint64(len(v.String)))])
			h.Write([]byte(v.String))
		}
	}
	return int64(h.Sum64()), rows.Err()
}

func quoteAll(names []string, quote func(string) string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n)
	}
	return strings.Join(q, ", ")
}

// scanList scans a comma-separated list (NULL: none).
func scanList(dst *[]string) sql.Scanner { return listScanner{dst} }

type listScanner struct{ dst *[]string }

func (l listScanner) Scan(v any) error {
	switch s := v.(type) {
	case nil:
		*l.dst = nil
	case string:
		*l.dst = strings.Split(s, ",")
	case []byte:
		*l.dst = strings.Split(string(s), ",")
	default:
		return fmt.Errorf("a list: got %T", v)
	}
	return nil
}
