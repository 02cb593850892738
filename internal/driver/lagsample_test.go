package driver

import (
	"sync"
	"testing"
	"time"
)

func TestAutoLagEvery(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rate          float64
		warmupCommits int64
		warmup        time.Duration
		budget        float64
		want          int
	}{
		{"open loop below the budget tracks every transaction", 60, 0, 0, 500, 1},
		{"open loop at the budget", 500, 0, 0, 500, 1},
		{"open loop just above it", 501, 0, 0, 500, 2},
		{"open loop at 5000/s", 5000, 0, 0, 500, 10},
		{"open loop ignores the warmup", 5000, 1, 10 * time.Second, 500, 10},
		{"budget 0 means the default", 5000, 0, 0, 0, 5000 / DefaultLagBudget},
		{"a negative budget means the default too", 5000, 0, 0, -1, 5000 / DefaultLagBudget},
		{"closed loop at 6000 tps in a 5 s warmup", 0, 30000, 5 * time.Second, 500, 12},
		{"closed loop at 5487 tps rounds up", 0, 27435, 5 * time.Second, 500, 11},
		{"closed loop below the budget", 0, 2000, 5 * time.Second, 500, 1},
		{"closed loop with no commits in the warmup", 0, 0, 5 * time.Second, 500, 1},
		{"closed loop without a warmup tracks every transaction", 0, 30000, 0, 500, 1},
		{"closed loop, half-second warmup", 0, 1000, 500 * time.Millisecond, 500, 4},
		{"a small budget", 0, 100, time.Second, 10, 10},
		{"N is bounded", 1e6, 0, 0, 0.001, maxLagEvery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := autoLagEvery(tc.rate, tc.warmupCommits, tc.warmup, tc.budget); got != tc.want {
				t.Errorf("autoLagEvery(%v, %d, %s, %v) = %d, want %d", tc.rate, tc.warmupCommits, tc.warmup, tc.budget, got, tc.want)
			}
		})
	}
}

// TestLagEveryIsChosenOnceAfterTheWarmup: warmup transactions are all
// tracked; the first transaction after the warmup fixes N from the
// warmup's commits, and every caller, however many race for it, gets that
// N — later commits do not change it.
func TestLagEveryIsChosenOnceAfterTheWarmup(t *testing.T) {
	d := &run{cfg: Config{Warmup: 2 * time.Second, LagBudget: 100}}
	if got := d.lagEvery(Warmup); got != 1 {
		t.Fatalf("warmup: N = %d, want 1", got)
	}
	if got := d.lagSampleEvery(); got != 0 {
		t.Fatalf("chosen before the measure phase: %d", got)
	}
	d.warmupCommits.Store(1000) // 500/s: N = 5
	var wg sync.WaitGroup
	got := make([]int64, 64)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				d.warmupCommits.Add(1000) // late warmup commits race the choice
			}
			phase := Measure
			if i%3 == 0 {
				phase = Cooldown
			}
			got[i] = d.lagEvery(phase)
		}()
	}
	wg.Wait()
	first := got[0]
	if first < 5 {
		t.Fatalf("N = %d, want at least 5 (1000 warmup commits in 2 s at 100/s)", first)
	}
	for i, n := range got {
		if n != first {
			t.Errorf("caller %d got N = %d, caller 0 got %d", i, n, first)
		}
	}
	d.warmupCommits.Store(1e9)
	if n := d.lagEvery(Measure); n != first || d.lagSampleEvery() != first {
		t.Errorf("N changed after it was chosen: %d, then %d", first, n)
	}
	if n := d.lagEvery(Warmup); n != 1 {
		t.Errorf("a transaction that started in the warmup uses N = %d, want 1", n)
	}
}

func TestLagEveryFixed(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want int64
	}{
		{"lag_sample = 1", Config{LagEvery: 1, Warmup: time.Second}, 1},
		{"lag_sample = 10, in the warmup too", Config{LagEvery: 10, Warmup: time.Second}, 10},
		{"open loop auto: from the rate, in the warmup too", Config{RatePerSec: 2000, Warmup: time.Second}, 2000 / DefaultLagBudget},
		{"open loop with a stated N ignores the rate", Config{LagEvery: 3, RatePerSec: 2000}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newRun(tc.cfg, nil)
			for _, ph := range []string{Warmup, Measure, Cooldown} {
				if got := d.lagEvery(ph); got != tc.want {
					t.Errorf("%s: N = %d, want %d", ph, got, tc.want)
				}
			}
		})
	}
}
