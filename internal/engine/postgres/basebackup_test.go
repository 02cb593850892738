package postgres

import (
	"strings"
	"testing"
	"time"
)

// progressClock is the copy's clock, moved by the test between lines.
type progressClock struct{ t time.Time }

func (c *progressClock) now() time.Time { return c.t }

func TestCopyProgressLogsBytesRateAndTimeLeft(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &progressClock{t: start}
	var log strings.Builder
	p := &copyProgress{log: &log, node: "a1", start: start, now: clk.now}
	feed := func(at time.Duration, s string) {
		t.Helper()
		clk.t = start.Add(at)
		if _, err := p.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	feed(0, "0/30000 kB (0%), 0/1 tablespace\n")
	feed(time.Second, "1000/30000 kB (3%), 0/1 tablespace\n") // too soon after the start: not logged
	// Two lines in one write, the first split across writes, as a pipe
	// delivers them.
	feed(2*time.Second, "2000/300")
	feed(2500*time.Millisecond, "00 kB (6%), 0/1 tablespace\r")
	feed(3*time.Second, "6000/30000 kB (20%), 0/1 tablespace\r7000/30000 kB (23%), 0/1 tablespace\r")
	feed(4*time.Second, "pg_basebackup: some warning\n")
	feed(5*time.Second, "9000/30000 kB (30%), 0/1 tablespace\n") // 2 s after the last line: not logged
	feed(6*time.Second, "12000/30000 kB (40%), 0/1 tablespace\n")
	feed(20*time.Second, "30000/30000 kB (100%), 1/1 tablespace\n")

	want := []string{
		// 6000 kB in 3 s: 2.05 MB/s; 24000 kB left: 12 s.
		"node a1: base backup 6.1 of 30.7 MB (20 %), 2.05 MB/s, about 12s left",
		// 6000 kB more in 3 s.
		"node a1: base backup 12.3 of 30.7 MB (40 %), 2.05 MB/s, about 9s left",
		"node a1: base backup 30.7 of 30.7 MB (100 %), 1.32 MB/s, finishing",
	}
	got := strings.Split(strings.TrimSpace(log.String()), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if out := p.output(); out != "pg_basebackup: some warning\n" {
		t.Errorf("output kept for errors = %q, want only the warning", out)
	}
}

func TestProgressIntervalGrowsWithTheCopy(t *testing.T) {
	for _, tc := range []struct{ age, want time.Duration }{
		{0, 3 * time.Second},
		{20 * time.Second, 3 * time.Second},
		{2 * time.Minute, 12 * time.Second},
		{3 * time.Hour, time.Minute},
	} {
		if got := progressInterval(tc.age); got != tc.want {
			t.Errorf("progressInterval(%s) = %s, want %s", tc.age, got, tc.want)
		}
	}
}

func TestStandbysSkipTheTLSRoundTripUnlessTheSpecTurnsSSLOn(t *testing.T) {
	for ssl, want := range map[string]string{"": "disable", "off": "disable", "of": "disable", "false": "disable", "on": "prefer", "ON": "prefer", "t": "prefer", "yes": "prefer", "1": "prefer"} {
		up := &node{}
		if ssl != "" {
			up.Settings = map[string]string{"ssl": ssl}
		}
		if got := sslMode(up); got != want {
			t.Errorf("ssl = %q: sslMode = %q, want %q", ssl, got, want)
		}
	}
}

func TestCopyRateSaysBytesRateAndTimeLeft(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		el          time.Duration
		want        string
	}{
		{0, 10e6, time.Second, "about 0.0 of 10.0 MB copied, waiting for data"},
		{2e6, 10e6, 4 * time.Second, "about 2.0 of 10.0 MB copied, 0.50 MB/s, about 16s left"},
		{10e6, 10e6, 5 * time.Second, "about 10.0 of 10.0 MB copied, 2.00 MB/s"},
	} {
		if got := copyRate(tc.done, tc.total, tc.el); got != tc.want {
			t.Errorf("copyRate(%d, %d, %s) = %q, want %q", tc.done, tc.total, tc.el, got, tc.want)
		}
	}
}
