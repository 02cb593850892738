package spec

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSearch(t *testing.T) {
	// sweepBase ends with [run] and users = 3: the first added line is 18.
	for _, tc := range []struct {
		name    string
		lines   string
		want    *Search
		wantErr string
	}{
		{"none", "", nil, ""},
		{"users, default steps", `search = "users"`,
			&Search{By: "users", Steps: []float64{3, 10, 30, 100, 300}, MinEfficiency: 0.5, MaxErrorPct: 1, Line: 18}, ""},
		{"users, every key", "search = \"users\"\nsearch_steps = [1, 2, 4]\nsearch_min_efficiency = 0.3\nsearch_max_p99 = \"250ms\"\nsearch_max_error_pct = 0",
			&Search{By: "users", Steps: []float64{1, 2, 4}, MinEfficiency: 0.3, MaxP99: 250 * time.Millisecond, Line: 18}, ""},
		{"rate", "search = \"rate\"\nsearch_steps = [\"100/s\", \"3/ms\"]", nil, `r.toml:19: run.search_steps = ["100/s", "3/ms"]: step 2: unknown unit "ms"`},
		{"rate steps", "search = \"rate\"\nsearch_steps = [\"100/s\", \"12000/min\"]",
			&Search{By: "rate", Steps: []float64{100, 200}, MinEfficiency: 0.5, MaxErrorPct: 1, Line: 18}, ""},
		{"rate without steps", `search = "rate"`, nil, `r.toml:18: run.search: a search by rate needs its steps`},
		{"unknown kind", `search = "memory"`, nil, `r.toml:18: run.search = "memory": want "users" (more users each step, closed loop) or "rate"`},
		{"users with a rate", "rate = \"100/s\"\nsearch = \"users\"", nil, `r.toml:19: run.search = "users": a search by users is closed loop: remove rate`},
		{"steps not rising", "search = \"users\"\nsearch_steps = [3, 30, 10]", nil, `r.toml:19: run.search_steps = [3, 30, 10]: step 3 (10) is not above the step before`},
		{"one step", "search = \"users\"\nsearch_steps = [3]", nil, `run.search_steps = [3]: want a list of at least two steps, like [3, 10, 30, 100, 300]`},
		{"users as rates", "search = \"users\"\nsearch_steps = [\"3/s\", 10]", nil, `step 1: want a whole number of users from 1 to 10000`},
		{"efficiency", "search = \"users\"\nsearch_min_efficiency = 1.5", nil, `r.toml:19: run.search_min_efficiency = 1.5: want a fraction above 0 and at most 1`},
		{"p99", "search = \"users\"\nsearch_max_p99 = \"0s\"", nil, `run.search_max_p99 = "0s": want a positive duration`},
		{"a search key alone", "search_steps = [1, 2]", nil, `r.toml:18: run.search_steps: search_steps belongs to a saturation search: add search = "users"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := sweepBase
			if tc.lines != "" {
				src += tc.lines + "\n"
			}
			s, err := Parse("r.toml", []byte(src))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Run.Search, tc.want) {
				t.Errorf("Search = %+v, want %+v", s.Run.Search, tc.want)
			}
		})
	}
}
