package engine

import (
	"maps"
	"slices"
)

// Divergence is one table whose copies differ: its checksum at each node
// that has it.
type Divergence struct {
	Table string           `json:"table"`
	Sums  map[string]int64 `json:"sums"` // node -> checksum; a node without the table is missing
}

// Diverged compares checksums (from Checksums): the tables whose copies
// are not all equal, or missing at some node, sorted by name; none when
// every copy agrees.
func Diverged(sums map[string]map[string]int64) []Divergence {
	tables := map[string]bool{}
	for _, ts := range sums {
		for t := range ts {
			tables[t] = true
		}
	}
	var out []Divergence
	for _, t := range slices.Sorted(maps.Keys(tables)) {
		d := Divergence{Table: t, Sums: map[string]int64{}}
		seen := map[int64]bool{}
		missing := false
		for node, ts := range sums {
			s, ok := ts[t]
			if !ok {
				missing = true
				continue
			}
			d.Sums[node] = s
			seen[s] = true
		}
		if missing || len(seen) > 1 {
			out = append(out, d)
		}
	}
	return out
}
