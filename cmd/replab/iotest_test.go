package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"replab/internal/iotest"
	"replab/internal/testkit"
)

// iotestSpec is a tiny two-site lab with a PostgreSQL primary and standby
// (never started: iotest only measures where their files would live).
func iotestSpec(t *testing.T) (path, name string) {
	t.Helper()
	name = fmt.Sprintf("cio-%d-%04x", os.Getpid()%10000, rand.IntN(0x10000))
	text := fmt.Sprintf(`[lab]
name = %q

[site.primary]
[site.eu]

[[link]]
sites = ["primary", "eu"]
delay = "5ms"
rate = "100mbit"

[engine]
kind = "postgres"

[node.p1]
site = "primary"
role = "primary"

[node.e1]
site = "eu"
role = "standby"
from = "p1"
`, name)
	path = filepath.Join(t.TempDir(), "iotest.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, name
}

func TestIotestMeasuresEveryNodeAndLeavesNothing(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Fio)
	state := t.TempDir()
	spec, name := iotestSpec(t)

	res := filepath.Join(t.TempDir(), "all")
	out, code := replab(t, state, "iotest", spec, "--quick", "-o", res)
	t.Logf("replab iotest --quick:\n%s", out)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	rep := readIotest(t, res)
	if !rep.Complete || rep.Lab != name || !rep.Quick || rep.RuntimePerJobS != 1 || rep.Environment.Kernel == "" {
		t.Errorf("iotest.json: complete %v, lab %s, quick %v, runtime %g s, kernel %q", rep.Complete, rep.Lab, rep.Quick, rep.RuntimePerJobS, rep.Environment.Kernel)
	}
	want := [][2]string{{"p1", "primary"}, {"e1", "eu"}}
	if len(rep.Nodes) != len(want) {
		t.Fatalf("%d nodes measured, want %d", len(rep.Nodes), len(want))
	}
	for i, n := range rep.Nodes {
		if n.Node != want[i][0] || n.Site != want[i][1] || n.Storage != "local" || n.Result == nil {
			t.Errorf("node %d: %s in %s on %s, want %s in %s on local", i, n.Node, n.Site, n.Storage, want[i][0], want[i][1])
			continue
		}
		checkFigures(t, n.Node, n.Result)
		if !strings.HasSuffix(n.Result.Dir, "/iotest-"+n.Node) {
			t.Errorf("node %s measured in %s", n.Node, n.Result.Dir)
		}
	}
	table, err := os.ReadFile(filepath.Join(res, "iotest.txt"))
	if err != nil || !strings.Contains(string(table), "rand read iops") || !strings.Contains(string(table), "e1") ||
		!strings.Contains(out, string(table)) {
		t.Errorf("iotest.txt (%v) is not the printed table:\n%s", err, table)
	}
	for _, f := range []string{"environment.json", "spec.toml"} {
		if _, err := os.Stat(filepath.Join(res, f)); err != nil {
			t.Errorf("results: %v", err)
		}
	}
	checkNothingLeft(t, name, rep.Nodes[0].Result.Dir)

	// One node, shorter jobs.
	res = filepath.Join(t.TempDir(), "one")
	out, code = replab(t, state, "iotest", spec, "--node", "e1", "--runtime", "300ms", "--size-mib", "4", "-o", res)
	if code != 0 {
		t.Fatalf("--node e1: exit %d:\n%s", code, out)
	}
	rep = readIotest(t, res)
	if len(rep.Nodes) != 1 || rep.Nodes[0].Node != "e1" || rep.RuntimePerJobS != 0.3 || rep.FileSizeBytes != 4<<20 {
		t.Errorf("--node e1 --runtime 300ms --size-mib 4: %d nodes, runtime %g s, file %d bytes", len(rep.Nodes), rep.RuntimePerJobS, rep.FileSizeBytes)
	} else {
		checkFigures(t, "e1", rep.Nodes[0].Result)
	}
	checkNothingLeft(t, name, "")

	out, code = replab(t, state, "iotest", spec, "--node", "x9", "-o", filepath.Join(t.TempDir(), "none"))
	if code == 0 || !strings.Contains(out, "no node x9") || !strings.Contains(out, "p1, e1") {
		t.Errorf("--node x9: exit %d, want an error naming the nodes:\n%s", code, out)
	}
}

func TestIotestHelp(t *testing.T) {
	t.Parallel()
	out, code := replab(t, "", "iotest", "--help")
	if code != 0 || strings.Count(out, "Usage:") != 1 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, w := range []string{"replab iotest FILE", "-quick", "-node", "-bs", "-o", "O_SYNC", "p99"} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in\n%s", w, out)
		}
	}
}

func TestParseBlockSizes(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    []int
		wantErr string
	}{
		{"", nil, ""},
		{"2k,4k,8k,16k,32k", []int{2048, 4096, 8192, 16384, 32768}, ""},
		{" 4K , 512 ", []int{4096, 512}, ""},
		{"4k,4096", nil, "given twice"},
		{"3000", nil, "multiple of 512"},
		{"2048k", nil, "up to 1024k"},
		{"4kb", nil, "not a size"},
		{"0", nil, "not a size"},
	} {
		got, err := parseBlockSizes(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: error %v, want one saying %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func readIotest(t *testing.T, dir string) iotest.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "iotest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep iotest.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("iotest.json: %v", err)
	}
	return rep
}

func checkFigures(t *testing.T, node string, r *iotest.Result) {
	t.Helper()
	figs := map[string]float64{"seq read MB/s": r.SeqReadMBPerS, "seq write MB/s": r.SeqWriteMBPerS,
		"sync write p50 ms": r.SyncWrite.P50Ms, "sync write p99 ms": r.SyncWrite.P99Ms}
	for _, b := range r.RandRead {
		figs[fmt.Sprintf("rand read %d iops", b.BlockBytes)] = b.IOPS
	}
	for _, b := range r.RandWrite {
		figs[fmt.Sprintf("rand write %d iops", b.BlockBytes)] = b.IOPS
	}
	if len(r.RandRead) != 2 || len(r.RandWrite) != 2 {
		t.Errorf("node %s: random I/O at %d and %d block sizes, want 2", node, len(r.RandRead), len(r.RandWrite))
	}
	for k, v := range figs {
		if !(v > 0) {
			t.Errorf("node %s: %s = %g", node, k, v)
		}
	}
	if r.SyncWrite.P99Ms < r.SyncWrite.P50Ms {
		t.Errorf("node %s: p99 %g ms < p50 %g ms", node, r.SyncWrite.P99Ms, r.SyncWrite.P50Ms)
	}
}

// checkNothingLeft: no namespace of the lab (ip netns list), and not the
// measured directory either.
func checkNothingLeft(t *testing.T, name, dir string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), name) {
		t.Errorf("namespaces of lab %s left:\n%s", name, out)
	}
	if left := netnsLeft(name); len(left) > 0 {
		t.Errorf("namespaces left: %v", left)
	}
	if dir != "" {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s is left", dir)
		}
	}
}
