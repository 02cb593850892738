package stats

import (
	"encoding/json"
	"math"
	"testing"
)

// The classic "sleep" data (Student 1908; R's datasets::sleep): extra hours
// of sleep under two drugs, ten patients each.
var (
	sleep1 = []float64{0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0}
	sleep2 = []float64{1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4}
)

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

func TestMeanCIOfAKnownSample(t *testing.T) {
	// R: t.test(sleep$extra[1:10]) → mean 0.75, 95 % CI -0.5297804 2.0297804.
	ci := MeanCI(sleep1, 0.95)
	if ci.N != 10 || ci.Level != 0.95 || !ci.Bounded() {
		t.Fatalf("MeanCI = %+v", ci)
	}
	if !near(ci.Mean, 0.75, 1e-12) || !near(ci.HalfWidth, 1.27978041352623, 1e-10) ||
		!near(ci.StdDev, 1.78900965775916, 1e-10) {
		t.Errorf("MeanCI = %+v, want mean 0.75 ± 1.2797804, sd 1.7890097", ci)
	}
	if !near(ci.Low(), -0.5297804, 1e-7) || !near(ci.High(), 2.0297804, 1e-7) {
		t.Errorf("interval [%v, %v], want [-0.5297804, 2.0297804]", ci.Low(), ci.High())
	}
	if !near(ci.RelHalfWidth(), 1.27978041352623/0.75, 1e-10) {
		t.Errorf("RelHalfWidth = %v", ci.RelHalfWidth())
	}
	if wider := MeanCI(sleep1, 0.99); wider.HalfWidth <= ci.HalfWidth {
		t.Errorf("99 %% interval %v is not wider than 95 %% %v", wider.HalfWidth, ci.HalfWidth)
	}
}

func TestMeanCIEdges(t *testing.T) {
	cases := []struct {
		name    string
		xs      []float64
		level   float64
		want    CI
		bounded bool
	}{
		{"empty: n 0, mean 0", nil, 0.95, CI{Level: 0.95}, false},
		{"one value: no interval", []float64{42}, 0.95, CI{Mean: 42, Level: 0.95, N: 1}, false},
		{"constant values: width 0", []float64{0.1, 0.1, 0.1}, 0.9, CI{Mean: 0.1, Level: 0.9, N: 3}, true},
		{"NaN and Inf skipped", []float64{math.NaN(), 5, math.Inf(1), 5}, 0.95, CI{Mean: 5, Level: 0.95, N: 2}, true},
		{"level outside (0, 1) becomes 0.95", []float64{7}, 95, CI{Mean: 7, Level: DefaultLevel, N: 1}, false},
		{"NaN level becomes 0.95", nil, math.NaN(), CI{Level: DefaultLevel}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := MeanCI(c.xs, c.level)
			if got != c.want || got.Bounded() != c.bounded {
				t.Errorf("MeanCI(%v, %v) = %+v (bounded %v), want %+v (bounded %v)",
					c.xs, c.level, got, got.Bounded(), c.want, c.bounded)
			}
			if _, err := json.Marshal(got); err != nil {
				t.Errorf("does not encode: %v", err)
			}
		})
	}
	t.Run("unbounded relative half-width is +Inf", func(t *testing.T) {
		if r := MeanCI([]float64{3}, 0.95).RelHalfWidth(); !math.IsInf(r, 1) {
			t.Errorf("RelHalfWidth = %v", r)
		}
		if r := MeanCI([]float64{-1, 1}, 0.95).RelHalfWidth(); !math.IsInf(r, 1) {
			t.Errorf("zero mean: RelHalfWidth = %v", r)
		}
		if r := MeanCI([]float64{2, 2}, 0.95).RelHalfWidth(); r != 0 {
			t.Errorf("constant: RelHalfWidth = %v", r)
		}
	})
}

func TestCIJSONIsTheSummaryContract(t *testing.T) {
	b, err := json.Marshal(MeanCI([]float64{1, 2, 3}, 0.95))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]float64
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mean", "half_width", "level", "n", "stddev"} {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q", b, k)
		}
	}
	if len(m) != 5 {
		t.Errorf("%s has other keys", b)
	}
}

func TestJainRepetitions(t *testing.T) {
	cases := []struct {
		name                    string
		mean, sd, level, relErr float64
		want                    int
	}{
		// Jain (1991) example 13.9: mean 20 s, sd 5 s, within ±1 s (5 %)
		// at 95 %: (100·1.96·5 / (5·20))² = 96.04 → 97.
		{"Jain's example", 20, 5, 0.95, 0.05, 97},
		// The storage study's pilot: mean 619, sd 172; 30 repetitions for
		// 95 % (within ±10 %).
		{"the storage study", 619, 172, 0.95, 0.10, 30},
		{"no spread needs one", 619, 0, 0.95, 0.10, 1},
		{"tiny spread needs one", 1000, 1, 0.95, 0.10, 1},
		{"zero mean is unreachable", 0, 1, 0.95, 0.10, RepetitionsCeiling},
		{"zero relative error is unreachable", 10, 1, 0.95, 0, RepetitionsCeiling},
		{"NaN mean is unreachable", math.NaN(), 1, 0.95, 0.1, RepetitionsCeiling},
		{"huge spread is capped", 1, 1e6, 0.95, 0.01, RepetitionsCeiling},
		{"bad level means 0.95", 20, 5, 2, 0.05, 97},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := JainRepetitions(c.mean, c.sd, c.level, c.relErr); got != c.want {
				t.Errorf("JainRepetitions(%v, %v, %v, %v) = %d, want %d", c.mean, c.sd, c.level, c.relErr, got, c.want)
			}
		})
	}
}

func TestRepetitionsNeeded(t *testing.T) {
	cases := []struct {
		name          string
		pilot         []float64
		level, relErr float64
		want          int
	}{
		// Pilots of three with the means and spreads above; t at the final
		// n (values from mpmath) asks for a few more than Jain's z.
		{"the storage study's pilot: 33, Jain says 30", []float64{447, 619, 791}, 0.95, 0.10, 33},
		{"Jain's example pilot: 99, Jain says 97", []float64{15, 20, 25}, 0.95, 0.05, 99},
		{"precise pilot needs no more than itself", []float64{100, 101, 99, 100, 100}, 0.95, 0.05, 5},
		{"constant pilot needs no more", []float64{7, 7, 7}, 0.95, 0.05, 3},
		{"empty pilot: run two", nil, 0.95, 0.05, 2},
		{"one value: run another", []float64{5}, 0.95, 0.05, 2},
		{"NaN skipped", []float64{447, math.NaN(), 619, 791}, 0.95, 0.10, 33},
		{"zero mean is unreachable", []float64{-1, 0, 1}, 0.95, 0.05, RepetitionsCeiling},
		{"zero relative error is unreachable", []float64{1, 2, 3}, 0.95, 0, RepetitionsCeiling},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RepetitionsNeeded(c.pilot, c.level, c.relErr); got != c.want {
				t.Errorf("RepetitionsNeeded(%v, %v, %v) = %d, want %d", c.pilot, c.level, c.relErr, got, c.want)
			}
		})
	}
	t.Run("n is the first size whose interval meets the target", func(t *testing.T) {
		const mean, sd, relErr = 1000.0, 80.0, 0.02
		pilot := []float64{mean - sd, mean, mean + sd}
		n := RepetitionsNeeded(pilot, 0.95, relErr)
		if jain := JainRepetitions(mean, sd, 0.95, relErr); n < jain || n > jain+4 {
			t.Fatalf("n = %d, Jain's = %d", n, jain)
		}
		rel := func(n int) float64 { return TQuantile(0.975, n-1) * sd / math.Sqrt(float64(n)) / mean }
		if rel(n) > relErr || rel(n-1) <= relErr {
			t.Errorf("n = %d: relative half-width %v at n, %v at n-1; target %v", n, rel(n), rel(n-1), relErr)
		}
	})
}
