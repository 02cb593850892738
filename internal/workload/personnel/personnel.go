// Package personnel is the military HR study's workload (DIMHRS): a
// 14-table personnel data model centred on PER (person), loaded with
// random letters and numbers, and the study's one transaction, an UPDATE
// of a person's several-hundred-character description.
package personnel

import (
	"sync"

	"replab/internal/engine"
	"replab/internal/workload"
)

// Factory registers the workload as kind "personnel".
var Factory = workload.Factory{Kind: "personnel", New: New}

// Option defaults and bounds.
const (
	DefaultPersons   = 2000 // the study used 500,000 (about 1 GB)
	MaxPersons       = 5_000_000
	DefaultTextBytes = 400 // "several hundred ASCII characters"
	MinTextBytes     = 100
	MaxTextBytes     = 4000 // per_dscrptn_text is varchar(4000)
)

// Workload is the personnel workload with its options resolved.
type Workload struct {
	persons   int64
	textBytes int
	readPct   int
	readsAt   string
	seed      uint64
	dialect   engine.Dialect

	totalOnce sync.Once
	total     int64

	written texts // the history's values (record.go)
}

// New reads the options: persons, text_bytes, read_pct and reads_at.
func New(o *workload.Options) (workload.Workload, error) {
	w := &Workload{
		persons:   o.Int("persons", DefaultPersons, 1, MaxPersons),
		textBytes: int(o.Int("text_bytes", DefaultTextBytes, MinTextBytes, MaxTextBytes)),
		readPct:   int(o.Int("read_pct", 0, 0, 100)),
		readsAt:   readsAt(o.String("reads_at", "source", "source", "replica")),
		seed:      uint64(o.Seed),
		dialect:   o.Dialect,
	}
	if _, ok := placeholders[o.Dialect]; !ok {
		return nil, workload.ErrNoDialect("personnel", o.Dialect)
	}
	return w, nil
}

// readsAt maps the reads_at option to where lookups run.
func readsAt(v string) string {
	if v == "replica" {
		return workload.AtReplica
	}
	return workload.AtSource
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return "personnel" }

// Schema implements workload.Workload: the 14 tables, each with an
// engine.Postgres and an engine.MySQL CREATE TABLE.
func (w *Workload) Schema() engine.Schema {
	var s engine.Schema
	for _, t := range tables {
		ddl := t.create()
		s.Tables = append(s.Tables, engine.Table{Name: t.name, Create: map[engine.Dialect]string{engine.Postgres: ddl, engine.MySQL: ddl}})
	}
	return s
}

// TotalRows implements workload.Workload: rows in every table together.
func (w *Workload) TotalRows() int64 {
	w.totalOnce.Do(func() {
		for _, t := range tables {
			w.total += w.tableRows(t)
		}
	})
	return w.total
}

// tableRows is how many rows Load puts in t.
func (w *Workload) tableRows(t *table) int64 {
	owners := t.owners(w)
	if t.count == nil {
		return owners
	}
	var n int64
	for id := int64(1); id <= owners; id++ {
		n += int64(t.count(w, id))
	}
	return n
}

// TableRows is how many rows Load puts in each table, by name.
func (w *Workload) TableRows() map[string]int64 {
	m := map[string]int64{}
	for _, t := range tables {
		m[t.name] = w.tableRows(t)
	}
	return m
}

// DataBytes implements workload.Sizer, roughly: each person's description
// and about 60 bytes for every row of every table.
func (w *Workload) DataBytes() int64 {
	return w.persons*int64(w.textBytes) + 60*w.TotalRows()
}
