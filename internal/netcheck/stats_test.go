package netcheck

import (
	"reflect"
	"testing"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name                       string
		xs                         []float64
		minV, mean, p50, p99, maxV float64
	}{
		{"none gives zeros", nil, 0, 0, 0, 0, 0},
		{"one sample is every statistic", []float64{2.5}, 2.5, 2.5, 2.5, 2.5, 2.5},
		{"median interpolates between the middle two", []float64{4, 1, 3, 2}, 1, 2.5, 2.5, 3.97, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			minV, mean, p50, p99, maxV := summarize(tt.xs)
			got := []float64{minV, mean, p50, p99, maxV}
			want := []float64{tt.minV, tt.mean, tt.p50, tt.p99, tt.maxV}
			for i := range got {
				if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
					t.Fatalf("summarize(%v) = %v, want %v", tt.xs, got, want)
				}
			}
		})
	}
}

func TestLossFromBitmap(t *testing.T) {
	// arrived lists sequence numbers that arrived out of n.
	tests := []struct {
		name    string
		n       int
		arrived []int
		want    LossResult
	}{
		{"nothing lost", 10, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
			LossResult{Sent: 10, Received: 10}},
		{"everything lost is one burst", 5, nil,
			LossResult{Sent: 5, LossFraction: 1, Bursts: 1, MaxBurstPackets: 5, MeanBurstPackets: 5}},
		{"bursts at both ends and in the middle", 12, []int{2, 3, 7, 8, 9},
			LossResult{Sent: 12, Received: 5, LossFraction: 7.0 / 12, Bursts: 3, MaxBurstPackets: 3, MeanBurstPackets: 7.0 / 3}},
		{"single losses", 9, []int{0, 2, 4, 6, 8},
			LossResult{Sent: 9, Received: 5, LossFraction: 4.0 / 9, Bursts: 4, MaxBurstPackets: 1, MeanBurstPackets: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bits := make([]byte, (tt.n+7)/8)
			for _, i := range tt.arrived {
				bits[i/8] |= 1 << (i % 8)
			}
			if got := lossFromBitmap(bits, tt.n); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
