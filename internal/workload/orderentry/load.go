package orderentry

import (
	"context"
	"strings"

	"replab/internal/engine"
	"replab/internal/workload"
	"replab/internal/workload/gendata"
)

// chunkOwners is how many owners one Copy takes (gendata.Load).
const chunkOwners = 20_000

// Load implements workload.Workload: warehouses and products, then the
// customers' tables, in chunks through l.Copy, then ANALYZE.
func (w *Workload) Load(ctx context.Context, l workload.Loader, progress func(rows int64)) error {
	g := newGen(w)
	ts := make([]gendata.Table, len(tables))
	for i, t := range tables {
		ts[i] = gendata.Table{Name: t.name, Columns: t.columns(), Owners: t.owners(w),
			Rows: func(id int64, n int) [][]any { return t.rows(g, g.At(t.salt, id), id, n) }}
		if t.count != nil {
			ts[i].Count = func(id int64) int { return t.count(w, id) }
		}
	}
	if err := gendata.Load(ctx, l, ts, chunkOwners, progress); err != nil {
		return err
	}
	return l.Exec(ctx, w.analyze())
}

// analyze updates the planner's statistics after loading.
func (w *Workload) analyze() string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.name
	}
	if w.dialect == engine.MySQL {
		return "ANALYZE TABLE " + strings.Join(names, ", ")
	}
	return "ANALYZE " + strings.Join(names, ", ")
}
