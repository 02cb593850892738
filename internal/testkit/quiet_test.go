package testkit

import (
	"testing"
	"time"
)

// The readings waitQuiet rests on: this process's CPU time grows while it
// spins, and the machine's busy time grows by at least as much (it
// includes this process).
func TestCPUReadings(t *testing.T) {
	b0, err := machineBusyTicks()
	if err != nil {
		t.Fatal(err)
	}
	s0, err := selfTicks()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	s1 := s0
	for s1-s0 < 20 && time.Now().Before(deadline) { // 0.2 s of CPU
		x := 0
		for i := range 1_000_000 {
			x += i
		}
		_ = x
		if s1, err = selfTicks(); err != nil {
			t.Fatal(err)
		}
	}
	b1, err := machineBusyTicks()
	if err != nil {
		t.Fatal(err)
	}
	if s1-s0 < 20 {
		t.Fatalf("this process's CPU time grew by %d ticks in 20 s of spinning, want 20", s1-s0)
	}
	if float64(b1-b0) < 0.8*float64(s1-s0) {
		t.Errorf("the machine was busy %d ticks while this process alone used %d", b1-b0, s1-s0)
	}
	other, err := otherCores(100 * time.Millisecond)
	if err != nil || other < 0 {
		t.Errorf("other work %.2f cores, %v", other, err)
	}
}
