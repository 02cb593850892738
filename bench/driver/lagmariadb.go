package main

import (
	"context"
	"fmt"

	"replab/internal/engine/mariadb"
)

// mariadbLag is the lag step on MariaDB: an asynchronous GTID replica
// and the same accounts and UPDATE as PostgreSQL's step. MariaDB has no
// pipeline, so a transaction is BEGIN, UPDATE, [the stamp,] COMMIT, each
// a round trip inside the primary's site.
var mariadbLag = lagTarget{
	prefix: "mariadb_", lab: "bench-lagmdb", engine: mariadb.Engine{}, dialect: "mysql",
	nodes: `
[engine]
kind = "mariadb"

[node.db]
site = "db"
role = "primary"

[node.sb]
site = "sb"
role = "replica"
from = "db"

[scheme]
replication = "async"
parallel_threads = 4
parallel_mode = "optimistic"
`,
	// Parallel apply, so that the replica keeps up as PostgreSQL's standby
	// does: applying serially, with two flushes per transaction, it fell
	// behind at about 1,000 transactions a second here (lag p50 0.5 s and
	// growing), and the watcher, always with a tracked transaction to look
	// for, polled 800 times a second: the figure then measured a replica
	// that cannot keep up, not the probe.
	scheme: "async binlog + GTID replica applying in parallel (slave_parallel_threads = 4, optimistic), primary db, replica sb (durability sync: innodb_flush_log_at_trx_commit = 1, sync_binlog = 1)",
	tx:     updateTxOf("UPDATE accounts SET abalance = abalance + 1 WHERE aid = ?"), // every update changes its row: MariaDB counts changed rows
	txText: "BEGIN; UPDATE accounts SET abalance = abalance + 1 WHERE aid = uniform(1, 1000000); [UPDATE replab_lag SET seq = ? WHERE writer = ?;] COMMIT, statement by statement",
	load: func(ctx context.Context, _ *bench, p *pgLab) error {
		stmts := []string{"CREATE TABLE accounts (aid INT NOT NULL PRIMARY KEY, bid INT NOT NULL, abalance INT NOT NULL, filler CHAR(84) NOT NULL) ENGINE=InnoDB"}
		// pgbench's accounts, in transactions of 100,000 rows from the
		// sequence engine (one binlog event group each).
		const chunk = 100000
		for lo := 1; lo <= compareAccounts; lo += chunk {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO accounts SELECT seq, (seq - 1) DIV 100000 + 1, 0, '' FROM seq_%d_to_%d", lo, lo+chunk-1))
		}
		return p.exec(ctx, "db", stmts...)
	},
}

func (b *bench) lagOverheadMariaDB(ctx context.Context) error {
	return b.lagOverheadOn(ctx, mariadbLag)
}
