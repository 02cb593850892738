package runner

import (
	"reflect"
	"testing"

	"replab/internal/report"
)

func TestCountConflicts(t *testing.T) {
	for _, c := range []struct {
		name          string
		before, after map[string]int64
		loadS         float64
		want          report.ReplicationConflicts
	}{
		{"differences", map[string]int64{"g1": 4, "g2": 0}, map[string]int64{"g1": 10, "g2": 3}, 12,
			report.ReplicationConflicts{Count: 9, PerS: 0.75, Nodes: map[string]int64{"g1": 6, "g2": 3}}},
		{"a node restarted", map[string]int64{"g1": 4, "g2": 7}, map[string]int64{"g1": 4, "g2": 2}, 10,
			report.ReplicationConflicts{Count: 2, PerS: 0.2, Nodes: map[string]int64{"g1": 0, "g2": 2}, Restarted: []string{"g2"}}},
		{"a node not read after", map[string]int64{"g1": 1, "g3": 5}, map[string]int64{"g1": 2}, 0,
			report.ReplicationConflicts{Count: 1, Nodes: map[string]int64{"g1": 1}, NotRead: []string{"g3"}}},
		{"a node new after", map[string]int64{}, map[string]int64{"m2": 3}, 3,
			report.ReplicationConflicts{Count: 3, PerS: 1, Nodes: map[string]int64{"m2": 3}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got report.ReplicationConflicts
			countConflicts(&got, c.before, c.after, c.loadS)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
