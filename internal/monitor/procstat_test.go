package monitor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	cases := []struct {
		file    string
		want    ProcStat
		wantErr string
	}{
		{file: "walsender.stat", want: ProcStat{PID: 4242, Comm: "postgres", State: 'S', PPID: 4200, UTime: 1234, STime: 567, NumThreads: 1, StartTime: 98765, RSSPages: 3210, BlkioTicks: 42}},
		{file: "comm-with-spaces.stat", want: ProcStat{PID: 77, Comm: "Web Content", State: 'R', PPID: 2, UTime: 5, STime: 6, NumThreads: 1, StartTime: 7, RSSPages: 8, BlkioTicks: 9}},
		{file: "comm-with-parens.stat", want: ProcStat{PID: 31337, Comm: "a) b (c) d", State: 'S', PPID: 3, UTime: 100, STime: 200, NumThreads: 1, StartTime: 300, RSSPages: 400, BlkioTicks: 500}},
		{file: "comm-ends-with-paren-space.stat", want: ProcStat{PID: 12, Comm: ") ) ", State: 'D', PPID: 6, UTime: 1, STime: 2, NumThreads: 1, StartTime: 3, RSSPages: 4, BlkioTicks: 5}},
		{file: "empty-comm.stat", want: ProcStat{PID: 13, Comm: "", State: 'S', PPID: 1, UTime: 10, STime: 20, NumThreads: 1, StartTime: 30, RSSPages: 40, BlkioTicks: 50}},
		{file: "no-newline.stat", want: ProcStat{PID: 14, Comm: "kworker/0:1-events", State: 'I', PPID: 2, STime: 999, NumThreads: 1, StartTime: 1}},
		{file: "old-kernel-41-fields.stat", wantErr: "want at least 40 (field 42"},
		{file: "no-comm.stat", wantErr: "no (comm)"},
		{file: "bad-utime.stat", wantErr: "field 14"},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.file, ".stat"), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseStat(b)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestParseStatOfThisProcess(t *testing.T) {
	r := statReader{root: "/proc"}
	s, err := r.read(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	// A thread's own stat: the main thread's TID is the PID.
	if th, err := r.read(os.Getpid(), os.Getpid()); err != nil || th.PID != os.Getpid() || th.StartTime != s.StartTime {
		t.Errorf("main thread's stat: %+v, %v", th, err)
	}
	if s.PID != os.Getpid() || s.PPID != os.Getppid() || s.RSSPages <= 0 || s.StartTime == 0 {
		t.Errorf("stat of this process: %+v", s)
	}
	if now := bootTicks(clockTicks()); s.StartTime > now {
		t.Errorf("started at %d ticks after boot, later than now (%d): start time and CLOCK_BOOTTIME disagree", s.StartTime, now)
	}
}

func TestClockTicks(t *testing.T) {
	// USER_HZ is 100 on every Linux architecture Go supports.
	if hz := clockTicks(); hz != 100 {
		t.Errorf("clock ticks per second %d, want 100", hz)
	}
}

func BenchmarkReadStat(b *testing.B) {
	r := statReader{root: "/proc"}
	pid := os.Getpid()
	for b.Loop() {
		if _, err := r.read(pid, 0); err != nil {
			b.Fatal(err)
		}
	}
}
