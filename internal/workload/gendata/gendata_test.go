package gendata

import (
	"context"
	"strings"
	"testing"

	"replab/internal/engine"
)

// copies records what each Copy received; storeLess drops one row of
// the table it names.
type copies struct {
	calls     []string
	rows      int64
	storeLess string
}

func (c *copies) Copy(ctx context.Context, table string, cols []string, src engine.RowSource) (int64, error) {
	var n int64
	for src.Next() {
		if _, err := src.Values(); err != nil {
			return n, err
		}
		n++
	}
	c.calls = append(c.calls, table)
	c.rows += n
	if table == c.storeLess {
		n--
	}
	return n, src.Err()
}
func (c *copies) Exec(context.Context, string) error { return nil }
func (c *copies) Close() error                       { return nil }

func TestLoad(t *testing.T) {
	g := New(7)
	tables := []Table{
		{Name: "ref", Columns: []string{"id"}, Owners: 5, Rows: func(id int64, n int) [][]any { return [][]any{{id}} }},
		{Name: "per", Columns: []string{"id", "v"}, Owners: 12000,
			Count: func(id int64) int { return Between(7, 1, id, 0, 2) },
			Rows: func(id int64, n int) [][]any {
				r := g.At(2, id)
				out := make([][]any, n)
				for i := range out {
					out[i] = []any{id, r.Int64()}
				}
				return out
			}},
	}
	var want int64 = 5
	for id := int64(1); id <= 12000; id++ {
		want += int64(Between(7, 1, id, 0, 2))
	}
	var c copies
	var reports []int64
	if err := Load(context.Background(), &c, tables, 5000, func(n int64) { reports = append(reports, n) }); err != nil {
		t.Fatal(err)
	}
	if c.rows != want || strings.Join(c.calls, " ") != "ref per per per" {
		t.Errorf("%d rows in %v, want %d in ref and 3 chunks of per", c.rows, c.calls, want)
	}
	if len(reports) == 0 || reports[len(reports)-1] != want {
		t.Errorf("progress %v, want it to end at %d", reports, want)
	}
	// The same owner's stream gives the same values.
	a, b := g.At(2, 99).Int64(), g.At(2, 99).Int64()
	if a != b || a == g.At(2, 100).Int64() {
		t.Errorf("streams: %d, %d", a, b)
	}

	c = copies{storeLess: "ref"}
	if err := Load(context.Background(), &c, tables, 5000, nil); err == nil || !strings.Contains(err.Error(), "load ref: 4 rows stored of 5 sent") {
		t.Errorf("a row lost: %v", err)
	}
	bad := []Table{{Name: "bad", Owners: 3, Count: func(int64) int { return 2 }, Rows: func(id int64, n int) [][]any { return [][]any{{id}} }}}
	if err := Load(context.Background(), &copies{}, bad, 10, nil); err == nil || !strings.Contains(err.Error(), "owner 1: 1 rows made, 2 counted") {
		t.Errorf("a miscount: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Load(ctx, &copies{}, tables[1:], 5000, nil); err == nil || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("canceled: %v", err)
	}
}
