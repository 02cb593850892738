package runner

import (
	"reflect"
	"testing"
)

func TestDivergedTables(t *testing.T) {
	tests := []struct {
		name string
		sums map[string]map[string]int64
		want map[string]string
	}{
		{"all equal", map[string]map[string]int64{"a": {"t": 1, "u": 2}, "b": {"t": 1, "u": 2}}, nil},
		{"one table differs", map[string]map[string]int64{"a": {"t": 1, "u": 2}, "b": {"t": 1, "u": 3}, "c": {"t": 1, "u": 2}},
			map[string]string{"u": "a 2, b 3, c 2"}},
		{"a node lacks a table", map[string]map[string]int64{"a": {"t": 0}, "b": {}},
			map[string]string{"t": "a 0, b missing"}},
		{"one node", map[string]map[string]int64{"a": {"t": 5}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := divergedTables(tc.sums); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
