package monitor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ProcStat is what the monitor takes from /proc/PID/stat (proc(5)). The
// kernel sums a process's threads into these fields.
type ProcStat struct {
	PID   int
	Comm  string // field 2, without the parentheses; may contain spaces and ')'
	State byte   // field 3
	PPID  int    // field 4
	// UTime and STime (fields 14, 15) are CPU time in user and kernel
	// mode, in clock ticks, since the process started.
	UTime uint64
	STime uint64
	// NumThreads (field 20) is the process's thread count.
	NumThreads int64
	// StartTime (field 22) is when the process started, in clock ticks
	// since boot (CLOCK_BOOTTIME).
	StartTime uint64
	// RSSPages (field 24) is the resident set in pages; it includes shared
	// pages (for PostgreSQL: the shared buffers the process touched).
	RSSPages int64
	// BlkioTicks (field 42, delayacct_blkio_ticks) is the time spent
	// waiting for block I/O, in clock ticks; 0 unless the kernel's delay
	// accounting is on (/proc/sys/kernel/task_delayacct).
	BlkioTicks uint64
	// ReadBytes and WriteBytes are what the process (or thread) made the
	// storage layer fetch and send, since it started: /proc/PID/io's
	// read_bytes and write_bytes (not socket traffic); 0 when unreadable.
	ReadBytes, WriteBytes uint64
}

// statFields is how many fields after the comm ParseStat needs (field 3
// to field 42).
const statFields = 42 - 2

// ParseStat parses one /proc/PID/stat line. The comm field is delimited by
// the first '(' and the last ')', since a process may rename itself to
// anything, spaces and parentheses included.
func ParseStat(b []byte) (ProcStat, error) {
	var s ProcStat
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 1 || closing < open {
		return s, fmt.Errorf("parse /proc stat %q: no (comm)", trim(b))
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return s, fmt.Errorf("parse /proc stat %q: pid: %w", trim(b), err)
	}
	s.PID, s.Comm = pid, string(b[open+1:closing])
	// Fields 3… after ") ", split without allocating a slice per field.
	var f [statFields][]byte
	n := 0
	rest := b[closing+1:]
	for n < statFields {
		rest = bytes.TrimLeft(rest, " \n")
		if len(rest) == 0 {
			break
		}
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		f[n], rest = rest[:end], rest[end:]
		n++
	}
	if n < statFields {
		return s, fmt.Errorf("parse /proc stat of pid %d: %d fields after the comm, want at least %d (field 42, delayacct_blkio_ticks)", pid, n, statFields)
	}
	field := func(i int) []byte { return f[i-3] } // proc(5) numbering
	if len(field(3)) != 1 {
		return s, fmt.Errorf("parse /proc stat of pid %d: state %q", pid, field(3))
	}
	s.State = field(3)[0]
	var errs []error
	u := func(i int) uint64 {
		v, err := strconv.ParseUint(string(field(i)), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("field %d: %w", i, err))
		}
		return v
	}
	s.PPID = int(u(4))
	s.UTime, s.STime = u(14), u(15)
	s.NumThreads = int64(u(20))
	s.StartTime = u(22)
	rss, err := strconv.ParseInt(string(field(24)), 10, 64)
	if err != nil {
		errs = append(errs, fmt.Errorf("field 24: %w", err))
	}
	s.RSSPages = rss
	s.BlkioTicks = u(42)
	if len(errs) > 0 {
		return s, fmt.Errorf("parse /proc stat of pid %d: %w", pid, errors.Join(errs...))
	}
	return s, nil
}

func trim(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// statReader reads /proc/PID/stat files into one reused buffer.
type statReader struct {
	root string // "/proc"
	buf  []byte
}

// read reads a process's stat, or one thread's (tid ≠ 0:
// /proc/PID/task/TID/stat, the same format for the thread alone).
func (r *statReader) read(pid, tid int) (ProcStat, error) {
	if r.buf == nil {
		r.buf = make([]byte, 4096)
	}
	path := r.root + "/" + strconv.Itoa(pid) + "/stat"
	if tid != 0 {
		path = r.root + "/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/stat"
	}
	f, err := os.Open(path)
	if err != nil {
		return ProcStat{}, err
	}
	defer f.Close()
	n, err := f.Read(r.buf)
	if err != nil {
		return ProcStat{}, err
	}
	st, err := ParseStat(r.buf[:n])
	if err != nil {
		return st, err
	}
	// The storage I/O it caused, from the io file beside stat.
	if io, err := os.Open(path[:len(path)-len("stat")] + "io"); err == nil {
		if n, err := io.Read(r.buf); err == nil {
			st.ReadBytes, st.WriteBytes = parseIO(r.buf[:n])
		}
		io.Close()
	}
	return st, nil
}

// parseIO reads read_bytes and write_bytes from /proc/PID/io.
func parseIO(b []byte) (read, write uint64) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, ok := bytes.Cut(line, []byte(": "))
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			continue
		}
		switch string(k) {
		case "read_bytes":
			read = n
		case "write_bytes":
			write = n
		}
	}
	return read, write
}

// atClkTck is the auxiliary vector entry that carries sysconf(_SC_CLK_TCK).
const atClkTck = 17

// clockTicks returns the kernel's USER_HZ (the unit of /proc/PID/stat
// times), from this process's auxiliary vector; 100 if it is unreadable.
func clockTicks() uint64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	for i := 0; i+16 <= len(b); i += 16 {
		k, v := binary.NativeEndian.Uint64(b[i:]), binary.NativeEndian.Uint64(b[i+8:])
		if k == atClkTck && v > 0 {
			return v
		}
		if k == 0 {
			break
		}
	}
	return 100
}

// bootTicks is the current CLOCK_BOOTTIME in clock ticks: comparable with
// ProcStat.StartTime.
func bootTicks(hz uint64) uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano()) / 1000 * hz / 1e6
}
