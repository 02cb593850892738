package lab

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCPUThrottle(t *testing.T) {
	for _, c := range []struct {
		name, stat string
		want       CPUThrottle
		ok         bool
	}{
		{"v1", "nr_periods 120\nnr_throttled 90\nthrottled_time 4500000000\nnr_bursts 0\nburst_time 0\n", CPUThrottle{120, 90, 4500000000}, true},
		{"v2", "usage_usec 812345\nuser_usec 700000\nsystem_usec 112345\nnr_periods 40\nnr_throttled 3\nthrottled_usec 25000\n", CPUThrottle{40, 3, 25000000}, true},
		{"no cpu controller", "usage_usec 812345\nuser_usec 700000\nsystem_usec 112345\n", CPUThrottle{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte(c.stat), 0o644); err != nil {
				t.Fatal(err)
			}
			s := &Site{Cgroups: []string{filepath.Join(dir, "absent"), dir}}
			got, ok := s.CPUThrottle()
			if got != c.want || ok != c.ok {
				t.Errorf("got %+v %v, want %+v %v", got, ok, c.want, c.ok)
			}
		})
	}
}
