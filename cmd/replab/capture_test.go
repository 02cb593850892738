package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"replab/internal/testkit"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCaptureCommand: replab capture on a running lab — errors are one
// line with a non-zero exit, --for ends by itself, Ctrl-C stops and
// reports, and tcpdump reads as many packets as the command printed.
func TestCaptureCommand(t *testing.T) {
	t.Parallel()
	testkit.Need(t, testkit.Lab, testkit.Tcpdump)
	tcpdump, _ := exec.LookPath("tcpdump")
	state := t.TempDir()
	spec, name := writeSpec(t, "cap")
	labUp(t, spec, state)
	dir := t.TempDir()

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"capture", "nolab-x", "primary->eu"}, "lab nolab-x is not running"},
		{[]string{"capture", name, "primary->mars"}, "links: primary->eu, eu->primary"},
		{[]string{"capture", "primary-eu"}, "not a link direction"},
		{[]string{"capture", "primary->eu", "--bytes", "5"}, "--bytes 5"},
	} {
		out, code := replab(t, state, c.args...)
		if code == 0 || !strings.Contains(out, c.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 || strings.Contains(out, "goroutine ") {
			t.Errorf("%v: exit %d, output %q: want one line with %q and a non-zero exit", c.args, code, out, c.want)
		}
	}

	// Ctrl-C: primary->eu into a file, in the background.
	file := filepath.Join(dir, "pe.pcap")
	var bg bytes.Buffer
	cmd := exec.Command(binPath, "capture", "--state", state, "--lab", name, "primary->eu", "-o", file)
	cmd.Stdout, cmd.Stderr = &bg, &bg
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(bg.String(), "Ctrl-C to stop") && time.Now().Before(deadline) && cmd.ProcessState == nil {
		time.Sleep(20 * time.Millisecond)
	}
	out, code := replab(t, state, "capture", "primary<->eu", "--for", "10s", "-o", filepath.Join(dir, "busy"))
	if code == 0 || !strings.Contains(out, "primary->eu is already being captured into "+file) {
		t.Errorf("second capture of primary->eu: exit %d: %s", code, out)
	}

	// A SYN goes primary->eu, a RST comes back (nothing listens on port 9).
	traffic := func() {
		for range 5 {
			replab(t, "", "exec", "--state", state, "primary", "--", "bash", "-c", "echo > /dev/tcp/198.18.0.2/9")
		}
	}
	traffic()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("capture after Ctrl-C: %v\n%s", err, bg.String())
	}

	// Both directions for 2 s, LAB given before the direction.
	both := exec.Command(binPath, "capture", "--state", state, name, "primary<->eu", "--for", "2s", "-o", filepath.Join(dir, "both"))
	var bothOut bytes.Buffer
	both.Stdout, both.Stderr = &bothOut, &bothOut
	if err := both.Start(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for !strings.Contains(bothOut.String(), "for 2s") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	traffic()
	if err := both.Wait(); err != nil {
		t.Errorf("capture --for 2s: %v\n%s", err, bothOut.String())
	}

	re := regexp.MustCompile(`(?m)^(\S+->\S+): (\d+) packets in (\S+)$`)
	counted := 0
	for _, o := range []string{bg.String(), bothOut.String()} {
		ms := re.FindAllStringSubmatch(o, -1)
		if len(ms) == 0 {
			t.Errorf("no counts in the output:\n%s", o)
		}
		for _, m := range ms {
			n, _ := strconv.Atoi(m[2])
			if n == 0 {
				t.Errorf("%s: 0 packets captured:\n%s", m[1], o)
			}
			res, err := exec.Command(tcpdump, "-nr", m[3]).Output()
			if err != nil {
				t.Errorf("tcpdump -nr %s: %v", m[3], err)
				continue
			}
			if got := strings.Count(string(res), "\n"); got != n {
				t.Errorf("%s: tcpdump reads %d packets, replab capture printed %d", m[1], got, n)
			}
			counted++
		}
	}
	if counted != 3 {
		t.Errorf("%d captures reported, want 3 (primary->eu, then both directions)", counted)
	}
	if _, err := os.Stat(filepath.Join(dir, "busy")); err == nil {
		t.Error("a refused capture created its directory's files")
	}
	out, code = replab(t, "", "capture", "--help")
	for _, w := range []string{"Usage: replab capture", "-for", "-o", "tcpdump -nr"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("capture --help: exit %d, no %q in\n%s", code, w, out)
		}
	}
}
