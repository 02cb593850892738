package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestLagSampleNote(t *testing.T) {
	two := func(r Replica) map[string]*Replica { a, b := r, r; return map[string]*Replica{"e1": &a, "a1": &b} }
	for _, tc := range []struct {
		name string
		s    Summary
		want string
	}{
		{"every transaction, auto", Summary{Replicas: two(Replica{SampleEvery: 1, Sample: "auto", SampleBudgetPerS: 500})}, ""},
		{"every transaction, fixed", Summary{Replicas: two(Replica{SampleEvery: 1, Sample: "fixed"})}, ""},
		{"a run from before sampling", Summary{Replicas: two(Replica{})}, ""},
		{"no replicas", Summary{}, ""},
		{"auto, closed loop", Summary{Mode: "closed", Replicas: two(Replica{SampleEvery: 11, Sample: "auto", SampleBudgetPerS: 500})},
			"lag tracked for every 11th transaction of each user (auto: ≤ 500 tracked/s at the warmup's rate)"},
		{"auto, open loop", Summary{Mode: "open", Replicas: two(Replica{SampleEvery: 10, Sample: "auto", SampleBudgetPerS: 500})},
			"lag tracked for every 10th transaction of each user (auto: ≤ 500 tracked/s at the target rate)"},
		{"fixed", Summary{Replicas: two(Replica{SampleEvery: 4, Sample: "fixed"})},
			"lag tracked for every 4th transaction of each user (lag_sample = 4)"},
		{"fixed, from before the sample field", Summary{Replicas: two(Replica{SampleEvery: 2})},
			"lag tracked for every 2nd transaction of each user (lag_sample = 2)"},
		{"every transaction by position", Summary{Replicas: two(Replica{LagMethod: "positions", LagPosition: "WAL replay LSN", SampleEvery: 1, Sample: "all"})},
			"lag of every transaction, by commit position (WAL replay LSN)"},
		{"by position and by stamps", Summary{Mode: "closed", Replicas: map[string]*Replica{
			"e1": {LagMethod: "positions", LagPosition: "WAL replay LSN", SampleEvery: 1, Sample: "all"},
			"l1": {LagMethod: "stamps", SampleEvery: 7, Sample: "auto", SampleBudgetPerS: 10},
			"a1": {LagMethod: "positions", LagPosition: "WAL replay LSN", SampleEvery: 1, Sample: "all"}}},
			"lag of every transaction, by commit position (WAL replay LSN) at a1, e1; by stamps at l1: lag tracked for every 7th transaction of each user (auto: ≤ 10 tracked/s at the warmup's rate)"},
		{"repetitions that chose different N", Summary{Kind: "repetitions",
			Replicas:    two(Replica{Sample: "auto", SampleBudgetPerS: 500}),
			Repetitions: []Repetition{{LagSampleEvery: 12}, {LagSampleEvery: 11}, {}, {LagSampleEvery: 13}}},
			"lag tracked for every Nth transaction of each user, N from 11 to 13 by repetition (auto: ≤ 500 tracked/s at the warmup's rate)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LagSampleNote(&tc.s); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	for n, want := range map[int]string{1: "1st", 2: "2nd", 3: "3rd", 4: "4th", 11: "11th", 12: "12th", 13: "13th", 21: "21st", 22: "22nd", 101: "101st", 111: "111th", 1000: "1000th"} {
		if got := ordinal(n); got != want {
			t.Errorf("ordinal(%d) = %q, want %q", n, got, want)
		}
	}
}

// The summary says, under the lag table, that the lag figures are a sample.
func TestPrintSummaryNamesTheLagSample(t *testing.T) {
	r := mustRead(t, filepath.Join("testdata", "run"))
	for _, rep := range r.Summary.Replicas {
		rep.SampleEvery, rep.Sample, rep.SampleBudgetPerS = 11, "auto", 500
	}
	var b bytes.Buffer
	PrintSummary(&b, r.Summary)
	out := b.String()
	want := "e1    eu   44.51   57.12   68.22  104.81            0     1.48 ms\n" +
		"  lag tracked for every 11th transaction of each user (auto: ≤ 500 tracked/s at the warmup's rate)\n\n"
	if !strings.Contains(out, want) {
		t.Errorf("summary does not end the lag table with the sample:\n%s", out)
	}
}

func TestFewLagSamplesWarns(t *testing.T) {
	rep := func(every int, count int64) *Replica {
		r := &Replica{SampleEvery: every, Sample: "auto"}
		r.LagMs.Count = count
		return r
	}
	for _, tc := range []struct {
		name string
		reps map[string]*Replica
		want string
	}{
		{"enough everywhere", map[string]*Replica{"a": rep(10, 500), "b": rep(10, 100)}, ""},
		{"every transaction tracked: no advice", map[string]*Replica{"a": rep(1, 5)}, ""},
		{"one replica short", map[string]*Replica{"us1": rep(75, 2), "eu1": rep(75, 176)}, "few lag samples at us1 (2)"},
		{"two, sorted", map[string]*Replica{"b": rep(4, 99), "a": rep(4, 0)}, "few lag samples at a (0), b (99)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fewLagSamples(&Summary{Replicas: tc.reps})
			if !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
				t.Errorf("got %q, want it to start with %q", got, tc.want)
			}
			if got != "" && !strings.Contains(got, "lag_sample = 1") {
				t.Errorf("%q does not say what to do", got)
			}
		})
	}
}
