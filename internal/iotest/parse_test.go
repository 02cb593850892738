package iotest

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"replab/internal/testkit"
	"strings"
	"testing"
)

// The testdata files are real fio 3.33 outputs of Args on this kind of
// machine: the defaults with O_DIRECT on the disk, Quick on the disk, and
// Quick buffered on tmpfs (/dev/shm).
func TestParseRealOutputs(t *testing.T) {
	cases := []struct {
		file               string
		read, write        []BlockIOPS
		seqRead, seqWrite  float64 // MB/s
		syncIOPS, p50, p99 float64 // ms
		version            string
	}{
		{
			file:    "fio-3.33-direct.json",
			read:    []BlockIOPS{{4096, 15790}, {16384, 5861}},
			write:   []BlockIOPS{{4096, 4226}, {16384, 1739}},
			seqRead: 440.6, seqWrite: 214.0,
			syncIOPS: 1131, p50: 0.436224, p99: 6.586368, version: "fio-3.33",
		},
		{
			file:    "fio-3.33-quick.json",
			read:    []BlockIOPS{{4096, 8804}, {16384, 3209}},
			write:   []BlockIOPS{{4096, 2317}, {16384, 5606}},
			seqRead: 575.6, seqWrite: 575.6,
			syncIOPS: 6238, p50: 0.136192, p99: 0.432128, version: "fio-3.33",
		},
		{
			file:    "fio-3.33-buffered-tmpfs.json",
			read:    []BlockIOPS{{4096, 244068}, {16384, 20882}},
			write:   []BlockIOPS{{4096, 160459}, {16384, 71935}},
			seqRead: 567.8, seqWrite: 1053.8,
			syncIOPS: 127687, p50: 0.003216, p99: 0.005920, version: "fio-3.33",
		},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			r, err := Parse(readTestdata(t, c.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.FioVersion != c.version {
				t.Errorf("version %q, want %q", r.FioVersion, c.version)
			}
			checkBlocks(t, "rand read", r.RandRead, c.read)
			checkBlocks(t, "rand write", r.RandWrite, c.write)
			near(t, "seq read MB/s", r.SeqReadMBPerS, c.seqRead, 0.05)
			near(t, "seq write MB/s", r.SeqWriteMBPerS, c.seqWrite, 0.05)
			near(t, "sync write iops", r.SyncWrite.IOPS, c.syncIOPS, 0.5)
			near(t, "sync write p50 ms", r.SyncWrite.P50Ms, c.p50, 1e-9)
			near(t, "sync write p99 ms", r.SyncWrite.P99Ms, c.p99, 1e-9)
			if r.SyncWrite.P99Ms < r.SyncWrite.P50Ms {
				t.Errorf("p99 %g < p50 %g", r.SyncWrite.P99Ms, r.SyncWrite.P50Ms)
			}
		})
	}
}

func TestParseRefusesIncompleteOutput(t *testing.T) {
	good := string(readTestdata(t, "fio-3.33-quick.json"))
	cases := []struct {
		name, out, want string
	}{
		{"no JSON at all", "fio: pid=0, err=2/file:filesetup.c:99, func=open, error=No such file", "no JSON"},
		{"truncated JSON", good[:len(good)/2], "read fio's JSON"},
		{"a failed job", strings.Replace(good, `"error" : 0`, `"error" : 22`, 1), "randread-4k failed with error 22"},
		{"a job missing", strings.Replace(good, `"jobname" : "seqwrite"`, `"jobname" : "other"`, 1), "no seqwrite job"},
		{"no p99 listed", strings.ReplaceAll(good, `"99.000000"`, `"99.500000"`), "no p99 completion latency"},
		{"a job that did no I/O", strings.Replace(good, `"bw_bytes" : 575565668`, `"bw_bytes" : 0`, 1), "seqread did no I/O"},
		{"a bad block size", strings.Replace(good, `"jobname" : "randread-16k"`, `"jobname" : "randread-x"`, 1), `block size "x"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.out))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one with %q", err, c.want)
			}
		})
	}
}

func TestParseSkipsNotesBeforeTheJSON(t *testing.T) {
	out := append([]byte("note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be capped at 1\n"),
		readTestdata(t, "fio-3.33-quick.json")...)
	if _, err := Parse(out); err != nil {
		t.Fatal(err)
	}
}

func TestJobNamesReadBack(t *testing.T) {
	for _, bs := range []int{512, 2048, 4096, 8192, 16384, 32768, 1 << 20} {
		name := JobName(jobRandRead, bs)
		_, size, _ := strings.Cut(name, "-")
		got, err := parseSize(size)
		if err != nil || got != bs {
			t.Errorf("%d -> %s -> %d, %v", bs, name, got, err)
		}
	}
}

// TestTableGolden pins the table's layout (go test -update rewrites it).
func TestTableGolden(t *testing.T) {
	var rows []Row
	for _, n := range []struct{ node, site, file string }{
		{"p1", "primary", "fio-3.33-direct.json"},
		{"e1", "eu", "fio-3.33-quick.json"},
		{"asia-standby", "asia", "fio-3.33-buffered-tmpfs.json"},
	} {
		r, err := Parse(readTestdata(t, n.file))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, Row{Node: n.node, Site: n.site, Storage: "local", Result: r})
	}
	var b bytes.Buffer
	WriteTable(&b, rows)
	testkit.Golden(t, filepath.Join("testdata", "table.golden"), b.Bytes())
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkBlocks(t *testing.T, what string, got, want []BlockIOPS) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range want {
		if got[i].BlockBytes != want[i].BlockBytes {
			t.Errorf("%s: block %d, want %d", what, got[i].BlockBytes, want[i].BlockBytes)
		}
		near(t, what+" iops", got[i].IOPS, want[i].IOPS, 0.5)
	}
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %g, want %g ± %g", what, got, want, tol)
	}
}
