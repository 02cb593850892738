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
		{"unknown kind", `search = "memory"`, nil, `r.toml:18: run.search = "memory": want "users" (more users each step, closed loop), "rate"`},
		{"users with a rate", "rate = \"100/s\"\nsearch = \"users\"", nil, `r.toml:19: run.search = "users": a search by users is closed loop: remove rate`},
		{"steps not rising", "search = \"users\"\nsearch_steps = [3, 30, 10]", nil, `r.toml:19: run.search_steps = [3, 30, 10]: step 3 (10) is not above the step before`},
		{"one step", "search = \"users\"\nsearch_steps = [3]", nil, `run.search_steps = [3]: want a list of at least two steps, like [3, 10, 30, 100, 300]`},
		{"users as rates", "search = \"users\"\nsearch_steps = [\"3/s\", 10]", nil, `step 1: want a whole number of users from 1 to 10000`},
		{"efficiency", "search = \"users\"\nsearch_min_efficiency = 1.5", nil, `r.toml:19: run.search_min_efficiency = 1.5: want a fraction above 0 and at most 1`},
		{"p99", "search = \"users\"\nsearch_max_p99 = \"0s\"", nil, `run.search_max_p99 = "0s": want a positive duration`},
		{"refined", "search = \"users\"\nsearch_steps = [1, 4, 16, 64]\nsearch_refine = 4",
			&Search{By: "users", Steps: []float64{1, 4, 16, 64}, MinEfficiency: 0.5, MaxErrorPct: 1, Refine: 4, Line: 18}, ""},
		{"refined by rate", "search = \"rate\"\nsearch_steps = [\"100/s\", \"400/s\"]\nsearch_refine = 0",
			&Search{By: "rate", Steps: []float64{100, 400}, MinEfficiency: 0.5, MaxErrorPct: 1, Line: 18}, ""},
		{"refine too many", "search = \"users\"\nsearch_refine = 21", nil, `r.toml:19: run.search_refine = 21: want a number of probes from 0 (none) to 20`},
		{"refine as text", "search = \"users\"\nsearch_refine = \"3\"", nil, `r.toml:19: run.search_refine = "3": want a whole number of probes`},
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

func TestLinkSearch(t *testing.T) {
	// sweepBase ends with [run] and users = 3: the first added line is 18.
	for _, tc := range []struct {
		name    string
		lines   string
		want    *LinkSearch
		wantErr string
	}{
		{"rate, every key", "search = \"link[1].rate\"\nsearch_range = [\"9.6kbit\", \"115.2kbit\"]\nsearch_resolution = \"1.2kbit\"\nsearch_max_lag_p99 = \"1s\"\nsearch_max_p99 = \"2s\"\nsearch_max_error_pct = 5",
			&LinkSearch{Param: "rate", Lo: 9600, Hi: 115200, Resolution: 1200, MaxLagP99: time.Second, MaxP99: 2 * time.Second, MaxErrorPct: 5, Line: 18}, ""},
		{"delay, one direction, default resolution", "search = \"link[1].reverse.delay\"\nsearch_range = [\"0ms\", \"400ms\"]\nsearch_max_lag_p99 = \"500ms\"",
			&LinkSearch{Dir: "reverse", Param: "delay", Lo: 0, Hi: 400, Resolution: 12.5, MaxLagP99: 500 * time.Millisecond, MaxErrorPct: 1, Line: 18}, ""},
		{"loss", "search = \"link[1].loss\"\nsearch_range = [\"0%\", \"10%\"]\nsearch_resolution = \"0.5%\"\nsearch_max_p99 = \"1s\"",
			&LinkSearch{Param: "loss", Lo: 0, Hi: 10, Resolution: 0.5, MaxP99: time.Second, MaxErrorPct: 1, Line: 18}, ""},
		{"no such link", "search = \"link[2].rate\"\nsearch_range = [\"9.6kbit\", \"1mbit\"]\nsearch_max_p99 = \"1s\"", nil,
			`r.toml:18: run.search = "link[2].rate": the spec has 1 [[link]] tables`},
		{"no such parameter", "search = \"link[1].jitter\"", nil, `r.toml:18: run.search = "link[1].jitter": want "link[N].rate"`},
		{"no range", "search = \"link[1].rate\"\nsearch_max_p99 = \"1s\"", nil, `r.toml:18: run.search: a link search needs its range: search_range = ["9600bit", "115200bit"]`},
		{"no bound", "search = \"link[1].rate\"\nsearch_range = [\"9.6kbit\", \"1mbit\"]", nil, `r.toml:18: run.search: a link search needs a bound to keep`},
		{"a range the wrong way round", "search = \"link[1].delay\"\nsearch_range = [\"400ms\", \"0ms\"]\nsearch_max_p99 = \"1s\"", nil,
			`r.toml:19: run.search_range = ["400ms", "0ms"]: the range's second end must be above its first`},
		{"a range of the wrong unit", "search = \"link[1].rate\"\nsearch_range = [\"10ms\", \"1mbit\"]\nsearch_max_p99 = \"1s\"", nil,
			`r.toml:19: run.search_range = ["10ms", "1mbit"]: unknown unit "ms"`},
		{"a resolution wider than the range", "search = \"link[1].rate\"\nsearch_range = [\"9.6kbit\", \"19.2kbit\"]\nsearch_resolution = \"20kbit\"\nsearch_max_p99 = \"1s\"", nil,
			`r.toml:20: run.search_resolution = "20kbit": want a step smaller than the range (9600bit)`},
		{"saturation keys", "search = \"link[1].rate\"\nsearch_range = [\"9.6kbit\", \"1mbit\"]\nsearch_max_p99 = \"1s\"\nsearch_steps = [1, 2]", nil,
			`r.toml:21: run.search_steps: belongs to a saturation search`},
		{"link keys in a saturation search", "search = \"users\"\nsearch_range = [1, 2]", nil,
			`r.toml:19: run.search_range: search_range belongs to a link search (search = "link[1].rate"), not to a saturation search`},
		{"with faults", "search = \"link[1].delay\"\nsearch_range = [\"0ms\", \"40ms\"]\nsearch_max_p99 = \"1s\"\n[[fault]]\nat = \"1s\"\nlink = \"a<->b\"\nset = \"down\"", nil,
			`r.toml:18: run.search: a link search sets the link itself probe after probe: it cannot also run [[fault]]s (line 21)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("r.toml", []byte(sweepBase+tc.lines+"\n"))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Run.LinkSearch, tc.want) {
				t.Errorf("LinkSearch = %+v, want %+v", s.Run.LinkSearch, tc.want)
			}
		})
	}
	ls := &LinkSearch{Link: 0, Param: "rate"}
	if ls.Path() != "link[1].rate" || ls.Setting(19200.4) != "rate=19200bit" || !ls.HigherIsBetter() {
		t.Errorf("rate: %s %s", ls.Path(), ls.Setting(19200.4))
	}
	ls = &LinkSearch{Link: 1, Dir: "forward", Param: "delay"}
	if ls.Path() != "link[2].forward.delay" || ls.Setting(12.5) != "delay=12.5ms" || ls.HigherIsBetter() || ls.Round(1.23456) != 1.235 {
		t.Errorf("delay: %s %s %v", ls.Path(), ls.Setting(12.5), ls.Round(1.23456))
	}
}
