package engine

// Dialect is what clients speak to an engine's servers: a flavour of SQL,
// or KV for an engine that stores records, not rows. A Table's statements
// are keyed by it, and a workload is built for one.
type Dialect string

// The dialects.
const (
	// Postgres is PostgreSQL's SQL: placeholders $1, $2, …
	Postgres Dialect = "postgres"
	// MySQL is MySQL's and MariaDB's SQL: placeholders ?.
	MySQL Dialect = "mysql"
	// KV is the "dialect" of an engine that stores records, not rows: its
	// clusters implement KV, and a workload that writes key-value records
	// (kv-insert) puts them through it.
	KV Dialect = "kv"
)

// DialectOf is e's dialect (Dialecter), or "" for an engine that says
// none.
func DialectOf(e Engine) Dialect {
	if d, ok := e.(Dialecter); ok {
		return d.Dialect()
	}
	return ""
}
