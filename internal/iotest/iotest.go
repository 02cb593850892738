// Package iotest measures a directory's storage as a database server sees
// it: it runs fio there (as the server's OS user, inside the node's site
// when asked) and reads random IOPS, sequential MB/s and synchronous-write
// latency percentiles from fio's JSON output.
package iotest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"replab/internal/enginekit"
)

// FileName is the one file every fio job of a profile reads and writes,
// inside the measured directory; Profile removes it.
const FileName = "replab-iotest.dat"

// Defaults of Options.
const (
	DefaultRuntime       = 3 * time.Second
	DefaultFileSizeBytes = 64 << 20
	QuickRuntime         = 1 * time.Second
	QuickFileSizeBytes   = 16 << 20
	SeqBlockBytes        = 1 << 20 // sequential read and write
	SyncBlockBytes       = 8 << 10 // synchronous write: a WAL / redo page
)

// DefaultBlockSizes are the random read and write block sizes: a small
// page (MariaDB's row-log and many file systems' block) and InnoDB's page;
// PostgreSQL's 8 KiB page lies between them.
var DefaultBlockSizes = []int{4 << 10, 16 << 10}

// User is an OS account fio runs as.
type User struct{ UID, GID int }

// Options tune Profile. The zero value measures with the defaults, as
// this process, in its own network namespace.
type Options struct {
	Runtime       time.Duration // per job; default DefaultRuntime (QuickRuntime with Quick)
	FileSizeBytes int64         // the file the jobs use; default DefaultFileSizeBytes (QuickFileSizeBytes with Quick)
	BlockSizes    []int         // random read/write block sizes in bytes; default DefaultBlockSizes
	// Quick shortens the defaults for tests: 1 s per job, a 16 MiB file.
	Quick bool
	// Buffered measures through the page cache; by default fio opens the
	// file with O_DIRECT where the file system allows it (Result.DirectIO
	// says which was used).
	Buffered bool
	// User runs fio as this account (the database server's, see
	// enginekit.ServerCredentials); nil = as this process.
	User *User
	// Start starts the fio process: nil = cmd.Start; (*lab.Site).Start
	// runs it inside a site (its network namespace and cgroups), where the
	// node's server would do its I/O.
	Start func(cmd *exec.Cmd) error
	// Fio is the fio binary; default "fio" from PATH.
	Fio string
}

func (o Options) withDefaults() Options {
	if o.Runtime <= 0 {
		o.Runtime = DefaultRuntime
		if o.Quick {
			o.Runtime = QuickRuntime
		}
	}
	if o.FileSizeBytes <= 0 {
		o.FileSizeBytes = DefaultFileSizeBytes
		if o.Quick {
			o.FileSizeBytes = QuickFileSizeBytes
		}
	}
	if len(o.BlockSizes) == 0 {
		o.BlockSizes = DefaultBlockSizes
	}
	if o.Fio == "" {
		o.Fio = "fio"
	}
	if o.Start == nil {
		o.Start = func(cmd *exec.Cmd) error { return cmd.Start() }
	}
	return o
}

// Result is one directory's profile. Every figure carries its unit in its
// name; MB is 10^6 bytes.
type Result struct {
	Dir            string       `json:"dir"`
	FioVersion     string       `json:"fio_version"`
	DirectIO       bool         `json:"direct_io"`
	RuntimePerJobS float64      `json:"runtime_per_job_s"`
	FileSizeBytes  int64        `json:"file_size_bytes"`
	RandRead       []BlockIOPS  `json:"rand_read"`
	RandWrite      []BlockIOPS  `json:"rand_write"`
	SeqReadMBPerS  float64      `json:"seq_read_mb_per_s"`
	SeqWriteMBPerS float64      `json:"seq_write_mb_per_s"`
	SyncWrite      SyncWriteLat `json:"sync_write"`
	ElapsedS       float64      `json:"elapsed_s"`
	FioCommandLine []string     `json:"fio_args,omitempty"`
	SyncBlockBytes int          `json:"sync_write_block_bytes"`
	SeqBlockBytes  int          `json:"seq_block_bytes"`
	QueueDepth     int          `json:"queue_depth"`
}

// BlockIOPS is random I/O at one block size, one request in flight.
type BlockIOPS struct {
	BlockBytes int     `json:"block_bytes"`
	IOPS       float64 `json:"iops"`
}

// SyncWriteLat is sequential 8 KiB writes to a file opened O_SYNC: each
// write returns once it is on stable storage, as a commit's WAL flush.
// Percentiles are fio's, from its completion-latency histogram.
type SyncWriteLat struct {
	IOPS  float64 `json:"iops"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
}

// Profile runs fio's jobs one after another in dir and returns what they
// measured. It removes fio's file afterwards, also on error or when ctx
// ends (fio is interrupted then).
func Profile(ctx context.Context, dir string, opt Options) (*Result, error) {
	opt = opt.withDefaults()
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("iotest: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("iotest: %s is not a directory", dir)
	}
	if _, err := exec.LookPath(opt.Fio); err != nil {
		return nil, fmt.Errorf("iotest: %s is missing: install it (apt-get install fio, or scripts/deps.sh test)", opt.Fio)
	}
	direct := !opt.Buffered && directIOWorks(dir)
	args := Args(dir, opt, direct)
	file := filepath.Join(dir, FileName)
	defer os.Remove(file)

	start := time.Now()
	cmd := exec.CommandContext(ctx, opt.Fio, args...)
	if opt.User != nil {
		enginekit.AsUser(cmd, opt.User.UID, opt.User.GID)
	}
	// fio stops its jobs and still writes its output on SIGINT; killed
	// if it lingers.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := opt.Start(cmd); err != nil {
		return nil, fmt.Errorf("iotest: start fio: %w", err)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("iotest %s: %w", dir, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("iotest %s: fio: %v: %s", dir, err, lastLines(stderr.String(), 3))
	}
	r, err := Parse(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("iotest %s: %w (fio said: %s)", dir, err, lastLines(stderr.String(), 3))
	}
	if err := r.check(opt.BlockSizes); err != nil {
		return nil, fmt.Errorf("iotest %s: %w", dir, err)
	}
	r.Dir = dir
	r.DirectIO = direct
	r.RuntimePerJobS = opt.Runtime.Seconds()
	r.FileSizeBytes = opt.FileSizeBytes
	r.ElapsedS = time.Since(start).Seconds()
	r.FioCommandLine = args
	r.SyncBlockBytes = SyncBlockBytes
	r.SeqBlockBytes = SeqBlockBytes
	r.QueueDepth = 1
	return r, nil
}

// check says which figure fio did not deliver.
func (r *Result) check(blocks []int) error {
	var missing []string
	have := func(list []BlockIOPS, bs int) bool {
		for _, b := range list {
			if b.BlockBytes == bs {
				return true
			}
		}
		return false
	}
	for _, bs := range blocks {
		if !have(r.RandRead, bs) {
			missing = append(missing, JobName("randread", bs))
		}
		if !have(r.RandWrite, bs) {
			missing = append(missing, JobName("randwrite", bs))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("fio's output has no job %s", strings.Join(missing, ", "))
	}
	return nil
}

// directIOWorks says whether dir's file system accepts O_DIRECT (tmpfs
// before Linux 6.6 and some FUSE file systems refuse it).
func directIOWorks(dir string) bool {
	p := filepath.Join(dir, ".replab-iotest-direct")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|syscall.O_DIRECT, 0o600)
	if err != nil {
		return !errors.Is(err, syscall.EINVAL)
	}
	f.Close()
	os.Remove(p)
	return true
}

func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if len(lines) == 0 || lines[len(lines)-1] != l {
			lines = append(lines, l) // fio repeats an error once per job
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(nothing on stderr)"
	}
	return strings.Join(lines, "; ")
}
