package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"replab/internal/report"
	"replab/internal/stats"
)

// TestRefineSearch bisects the load between a knee of 16 users and an
// exhaust point of 64 on made-up curves: each probe is judged against the
// knee at the time, and moves one end of the bracket.
func TestRefineSearch(t *testing.T) {
	linear := func(load float64) float64 { return 10 * load }
	capped := func(c float64) func(float64) float64 {
		return func(load float64) float64 { return 10 * min(load, c) }
	}
	ok := func(tps func(float64) float64) func(float64) (*report.Summary, error) {
		return func(load float64) (*report.Summary, error) { return stepSum(tps(load), 5, int64(tps(load)*10), 0), nil }
	}
	type probe struct {
		load   float64
		closed string
	}
	k, x := report.ClosedKnee, report.ClosedExhaust
	for _, tc := range []struct {
		name          string
		by            string
		steps         []float64
		probes        int
		maxP99Ms      float64
		curve         func(load float64) (*report.Summary, error)
		want          []probe
		knee, exhaust float64
	}{
		{"a capacity of 37 users: 40 still scales against 16, on average; then to one user", "users", []float64{1, 4, 16, 64}, 10, 0, ok(capped(37)),
			[]probe{{40, k}, {52, x}, {46, x}, {43, x}, {42, x}, {41, x}}, 40, 41},
		{"two probes at most", "users", []float64{1, 4, 16, 64}, 2, 0, ok(capped(37)),
			[]probe{{40, k}, {52, x}}, 40, 52},
		{"errors above 30 users", "users", []float64{1, 4, 16, 64}, 10, 0, func(load float64) (*report.Summary, error) {
			errs := int64(0)
			if load > 30 {
				errs = int64(2 * load) // 2 % of 100 per user
			}
			return stepSum(linear(load), 5, int64(100*load)-errs, errs), nil
		}, []probe{{40, x}, {28, k}, {34, x}, {31, x}, {30, k}}, 30, 31},
		{"commit p99 past 100 ms above 33 users", "users", []float64{1, 4, 16, 64}, 3, 100, func(load float64) (*report.Summary, error) {
			return stepSum(linear(load), 3*load, int64(100*load), 0), nil
		}, []probe{{40, x}, {28, k}, {34, x}}, 28, 34},
		{"runs stop above 45 users", "users", []float64{1, 4, 16, 64}, 10, 0, func(load float64) (*report.Summary, error) {
			if load > 45 {
				return &report.Summary{StopReason: "too many errors"}, errors.New("too many errors")
			}
			return stepSum(linear(load), 5, int64(100*load), 0), nil
		}, []probe{{40, k}, {52, x}, {46, x}, {43, k}, {45, k}}, 45, 46},
		{"by rate: a capacity of 200/s", "rate", []float64{100, 400}, 2, 0, ok(func(load float64) float64 { return min(load, 200) }),
			[]probe{{250, k}, {325, x}}, 250, 325},
		{"by rate, to 1 % of the steps' knee, on a grid of thousandths", "rate", []float64{100, 400}, 20, 0, ok(func(load float64) float64 { return min(load, 200) }),
			[]probe{{250, k}, {325, x}, {287.5, x}, {268.75, x}, {259.375, x}, {254.688, x}, {252.344, x}, {251.172, x}, {250.586, x}}, 250, 250.586},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := &report.Search{By: tc.by, MinEfficiency: 0.5, MaxErrorPct: 1, MaxP99Ms: tc.maxP99Ms}
			for i, load := range tc.steps {
				sum, err := tc.curve(load)
				var prev *report.SearchStep
				if n := len(sr.Steps); n > 0 {
					prev = &sr.Steps[n-1]
				}
				st := judgeStep(sr, prev, load, fmt.Sprintf("step-%02d", i+1), sum, err)
				sr.Steps = append(sr.Steps, st)
				if !st.Scales {
					break
				}
			}
			concludeSearch(sr, len(tc.steps))
			if sr.KneeStep != len(tc.steps)-1 || sr.ExhaustStep != len(tc.steps) {
				t.Fatalf("the steps: knee %d, exhaust %d; want the last two", sr.KneeStep, sr.ExhaustStep)
			}
			saves := 0
			sum, err := refineSearch(sr, tc.probes, func(name string, load float64, knee *report.SearchStep) (*report.SearchStep, *report.Summary, error) {
				s, err := tc.curve(load)
				st := judgeStep(sr, knee, load, name, s, err)
				return &st, s, nil
			}, func() error { saves++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			var got []probe
			for i, p := range sr.Refine {
				got = append(got, probe{p.Load, p.Closed})
				if p.Dir != fmt.Sprintf("refine-%02d", i+1) {
					t.Errorf("probe %d: dir %q", i+1, p.Dir)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("probes %v\nwant   %v", got, tc.want)
			}
			if sr.KneeLoad != tc.knee || sr.ExhaustLoad != tc.exhaust || sr.Knee().Load != tc.knee || sr.Exhaust().Load != tc.exhaust {
				t.Errorf("bracket [%g, %g] (Knee %g, Exhaust %g), want [%g, %g]", sr.KneeLoad, sr.ExhaustLoad, sr.Knee().Load, sr.Exhaust().Load, tc.knee, tc.exhaust)
			}
			if saves != len(sr.Refine) {
				t.Errorf("search.json saved %d times for %d probes", saves, len(sr.Refine))
			}
			if sr.KneeStep != len(tc.steps)-1 || sr.Steps[sr.KneeStep-1].Load != tc.steps[len(tc.steps)-2] {
				t.Errorf("the steps' knee moved: %d", sr.KneeStep)
			}
			if tc.knee != tc.steps[len(tc.steps)-2] {
				if want, _ := tc.curve(tc.knee); sum == nil || sum.TPS != want.TPS {
					t.Errorf("the knee's summary %+v, want the probe at %g", sum, tc.knee)
				}
			}
		})
	}
}

// TestRefineSearchJudgesAgainstTheKnee: a probe's efficiency is its rise
// over the knee at the time, not over the step before it in the table.
func TestRefineSearchJudgesAgainstTheKnee(t *testing.T) {
	sr := &report.Search{By: "users", MinEfficiency: 0.5, MaxErrorPct: 1,
		Steps: []report.SearchStep{{Load: 16, TPS: 160, Scales: true}, {Load: 64, TPS: 200}}, KneeStep: 1, ExhaustStep: 2}
	tps := map[float64]float64{40: 370, 52: 380}
	var against []float64
	_, err := refineSearch(sr, 2, func(name string, load float64, knee *report.SearchStep) (*report.SearchStep, *report.Summary, error) {
		against = append(against, knee.Load)
		st := judgeStep(sr, knee, load, name, stepSum(tps[load], 5, 1000, 0), nil)
		return &st, nil, nil
	}, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(against, []float64{16, 40}) || sr.Refine[1].Against != 40 {
		t.Errorf("judged against %v, want 16 then 40 (the first probe scaled)", against)
	}
	if e := sr.Refine[0].Efficiency; e == nil || *e != 0.875 {
		t.Errorf("efficiency of 40 over 16: %v, want 0.875", e)
	}
	if e := sr.Refine[1].Efficiency; e == nil || *e != 0.09 {
		t.Errorf("efficiency of 52 over 40: %v, want 0.09", e)
	}
}

// TestRefineSearchStopsWhenInterrupted: the interrupted probe is kept,
// closing nothing, and the bracket stays where the probes before put it.
func TestRefineSearchStopsWhenInterrupted(t *testing.T) {
	sr := &report.Search{By: "users", MinEfficiency: 0.5, MaxErrorPct: 1,
		Steps: []report.SearchStep{{Load: 16, TPS: 160, Scales: true}, {Load: 64, TPS: 200}}, KneeStep: 1, ExhaustStep: 2, KneeLoad: 16, ExhaustLoad: 64}
	stop := errors.New("interrupted")
	n := 0
	_, err := refineSearch(sr, 5, func(name string, load float64, knee *report.SearchStep) (*report.SearchStep, *report.Summary, error) {
		n++
		sum := &report.Summary{Complete: true, TPS: 10 * load, Transactions: 100, CommitLatency: stats.Percentiles{P99: 5}}
		var err error
		if n == 2 {
			sum.Complete, err = false, stop
		}
		st := judgeStep(sr, knee, load, name, sum, err)
		return &st, sum, err
	}, func() error { return nil })
	if !errors.Is(err, stop) || len(sr.Refine) != 2 || sr.Refine[1].Closed != "" || sr.KneeLoad != 40 || sr.ExhaustLoad != 64 {
		t.Errorf("err %v, probes %+v, bracket [%g, %g]", err, sr.Refine, sr.KneeLoad, sr.ExhaustLoad)
	}
	var b strings.Builder
	report.PrintSearch(&b, sr)
	if !strings.Contains(b.String(), "probe 2, against 40: interrupted") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestFakeSearchRefinesTheKnee: the fake commits one transaction at a time
// for 2 ms (about 500 a second); users thinking 10 ms between
// transactions scale from 2 (about 170 a second) and are exhausted well
// before 32. Two probes, each repeated twice, narrow the bracket: where
// they land depends on the machine's timing, so the test holds them to
// the rules only — each inside the bracket of its time, judged against
// the knee then, closing one end — and checks what the run leaves behind.
func TestFakeSearchRefinesTheKnee(t *testing.T) {
	t.Parallel()
	sum, out, log, err := fakeRun(t, fakeSpec(`commit_time = "2ms"`, `think = "10ms"
search = "users"
search_steps = [2, 32]
search_refine = 2
repetitions = 2
`))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	b, err := os.ReadFile(filepath.Join(out, "search.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sr report.Search
	if err := json.Unmarshal(b, &sr); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	report.PrintSearch(&table, &sr)
	t.Logf("\n%s", table.String())
	if sr.KneeStep != 1 || sr.ExhaustStep != 2 || len(sr.Steps) != 2 {
		t.Fatalf("steps: knee %d, exhaust %d of %d; want 1 and 2: 32 users cannot scale on 500 commits a second", sr.KneeStep, sr.ExhaustStep, len(sr.Steps))
	}
	if len(sr.Refine) != 2 || sr.Refine[0].Load != 17 {
		t.Fatalf("probes %+v: want two, the first at 17 users", sr.Refine)
	}
	knee, exhaust := 2.0, 32.0
	for i, p := range sr.Refine {
		if p.Load <= knee || p.Load >= exhaust || p.Against != knee {
			t.Errorf("probe %d at %g against %g: outside the bracket [%g, %g], or judged against another knee", i+1, p.Load, p.Against, knee, exhaust)
		}
		switch p.Closed {
		case report.ClosedKnee:
			knee = p.Load
		case report.ClosedExhaust:
			exhaust = p.Load
		default:
			t.Errorf("probe %d closed %q", i+1, p.Closed)
		}
		var ps map[string]any
		if b, err := os.ReadFile(filepath.Join(out, p.Dir, "summary.json")); err != nil || json.Unmarshal(b, &ps) != nil || ps["kind"] != "repetitions" {
			t.Errorf("probe %s: %v, kind %v: want its repetitions' aggregate", p.Dir, err, ps["kind"])
		}
		if _, err := os.Stat(filepath.Join(out, p.Dir, "rep-02", "summary.json")); err != nil {
			t.Errorf("probe %s is not repeated: %v", p.Dir, err)
		}
	}
	if sr.KneeLoad != knee || sr.ExhaustLoad != exhaust {
		t.Errorf("bracket [%g, %g], want [%g, %g] from the probes", sr.KneeLoad, sr.ExhaustLoad, knee, exhaust)
	}
	if users := num(t, sum, "users"); users != knee {
		t.Errorf("summary.json is of %g users, the knee is at %g", users, knee)
	}
	if !strings.Contains(table.String(), "← probe 2, against ") || !strings.Contains(table.String(), "refined by 2 probes between the steps' knee at 2 and exhaust point at 32 users") {
		t.Errorf("the table does not mark the probes:\n%s", table.String())
	}
}
