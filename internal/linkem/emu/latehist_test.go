package emu

import "testing"

func TestLateBucket(t *testing.T) {
	tests := []struct {
		name string
		ns   int64
		up   float64 // the bucket's upper bound, µs
	}{
		{"negative counts as on time", -5, 1},
		{"under a microsecond", 999, 1},
		{"linear below 16 µs", 15_999, 16},
		{"16 µs starts the octaves", 16_000, 18},
		{"17.9 µs", 17_999, 18},
		{"1 ms", 1_000_000, 1024},
		{"1.1 ms is past 1 ms", 1_100_000, 1152},
		{"an hour is the last bucket", 3600e9, 1 << 27},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := lateBucket(tt.ns)
			if got := LateBucketUpperUs(i); got != tt.up {
				t.Errorf("lateBucket(%d ns) = %d, upper %v µs; want upper %v", tt.ns, i, got, tt.up)
			}
			if i > 0 && float64(tt.ns)/1e3 < LateBucketUpperUs(i-1) && tt.ns >= 0 {
				t.Errorf("%d ns falls below bucket %d's lower bound %v µs", tt.ns, i, LateBucketUpperUs(i-1))
			}
		})
	}
}

func TestLateHistQuantile(t *testing.T) {
	var h LateHist
	if h.QuantileUs(0.99) != 0 {
		t.Error("empty histogram: want 0")
	}
	for range 98 {
		h.record(20_000) // 20 µs
	}
	h.record(500_000)   // 0.5 ms
	h.record(3_000_000) // 3 ms
	if got := h.QuantileUs(0.5); got != 22 {
		t.Errorf("p50 = %v µs; want 22 (the bucket [20, 22))", got)
	}
	if got := h.QuantileUs(0.99); got != 512 {
		t.Errorf("p99 = %v µs; want 512 (the 99th of 100 is the 0.5 ms one)", got)
	}
	if got := h.QuantileUs(1); got != 3072 {
		t.Errorf("p100 = %v µs; want 3072", got)
	}
}
