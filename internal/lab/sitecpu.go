package lab

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUThrottle is what a site's cgroup says of its cpu limit: the CFS
// periods in which the site's processes ran, and those in which they used
// up their quota and waited (cpu.stat, cgroup v1 and v2).
type CPUThrottle struct {
	Periods, Throttled int64
	ThrottledNs        int64 // time the site's processes waited for the next period
}

// CPUThrottle reads the site's cpu.stat; ok is false when the site has no
// cgroup with one (an offline lab, or no cpu controller).
func (s *Site) CPUThrottle() (CPUThrottle, bool) {
	for _, dir := range s.Cgroups {
		f, err := os.Open(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			continue
		}
		t, ok := parseCPUStat(f)
		f.Close()
		if ok {
			return t, true
		}
	}
	return CPUThrottle{}, false
}

// parseCPUStat reads cpu.stat's "key value" lines: nr_periods and
// nr_throttled in both hierarchies, throttled_time (ns) in v1 and
// throttled_usec in v2.
func parseCPUStat(f *os.File) (CPUThrottle, bool) {
	var t CPUThrottle
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "nr_periods":
			t.Periods, found = n, true
		case "nr_throttled":
			t.Throttled = n
		case "throttled_time":
			t.ThrottledNs = n
		case "throttled_usec":
			t.ThrottledNs = n * 1000
		}
	}
	return t, found && sc.Err() == nil
}
