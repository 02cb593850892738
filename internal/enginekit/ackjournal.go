package enginekit

import (
	"context"
	"database/sql"
	"fmt"

	"replab/internal/engine"
)

// The acknowledged-commits journal, for verification: every writing
// transaction of a run with verification on also inserts its key (writer,
// seq) into the table replab_journal, in the same transaction as its
// changes; after the run, the keys found at each node are compared with
// those whose COMMIT was acknowledged. (Not the lag probe's per-writer
// journal of stamps, package lagprobe.)

// AckTableName is the acknowledged-commits journal's table.
const AckTableName = "replab_journal"

// AckTable is the journal's definition: replicated whole, everywhere.
func AckTable() engine.Table {
	return engine.Table{
		Name:       AckTableName,
		Everywhere: true,
		Create: map[engine.Dialect]string{
			engine.Postgres: "CREATE TABLE " + AckTableName + " (writer int NOT NULL, seq bigint NOT NULL, PRIMARY KEY (writer, seq))",
			engine.MySQL:    "CREATE TABLE " + AckTableName + " (writer INT NOT NULL, seq BIGINT NOT NULL, PRIMARY KEY (writer, seq)) ENGINE=InnoDB",
		},
	}
}

// AckInsertSQL is the statement a journalled transaction runs, with the
// arguments (seq, writer).
func AckInsertSQL(dialect engine.Dialect) (string, error) {
	switch dialect {
	case engine.Postgres:
		return "INSERT INTO " + AckTableName + " (seq, writer) VALUES ($1, $2)", nil
	case engine.MySQL:
		return "INSERT INTO " + AckTableName + " (seq, writer) VALUES (?, ?)", nil
	}
	return "", fmt.Errorf("the verification journal has no SQL for dialect %q (it knows postgres, mysql)", dialect)
}

// AckKey is one journalled transaction.
type AckKey struct {
	Writer int
	Seq    int64
}

// ReadAcks reads every key of the journal at a node through db.
func ReadAcks(ctx context.Context, db *sql.DB) (map[AckKey]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT writer, seq FROM "+AckTableName)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[AckKey]bool{}
	for rows.Next() {
		var k AckKey
		if err := rows.Scan(&k.Writer, &k.Seq); err != nil {
			return nil, err
		}
		out[k] = true
	}
	return out, rows.Err()
}
