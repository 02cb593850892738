package pageread

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/engine/xrootd"
	"replab/internal/labtest"
	"replab/internal/pagestats"
	"replab/internal/report"
	"replab/internal/runner"
	"replab/internal/spec"
	"replab/internal/testkit"
	"replab/internal/workload"
)

// TestRunWithCapture runs page reads as `replab run` does, with the link
// captured: summary.json's pages agree with pages.csv and with the
// driver's count, the client is the site without a node, and each
// direction's pcap file opens with tcpdump and holds as many packets as the
// link delivered.
func TestRunWithCapture(t *testing.T) {
	testkit.Need(t, testkit.Lab, testkit.XRootD, testkit.Tcpdump)
	dir := t.TempDir()
	text := strings.Replace(linkSpec, `name = "NAME"`, `name = "`+labtest.UniqueName("pgrun")+`"`, 1)
	text = strings.Replace(text, `rate = "20mbit"`, "rate = \"20mbit\"\ncapture = true", 1) + `
[workload]
kind = "page-read"
[run]
users = 4
warmup = "1s"
duration = "3s"
`
	path := filepath.Join(dir, "spec.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := spec.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var log strings.Builder
	out := filepath.Join(dir, "results")
	sum, _, err := runner.Run(ctx, s, runner.Options{Out: out, StateRoot: t.TempDir(), DataRoot: t.TempDir(), Log: &log, Version: "test",
		Engines: engine.NewRegistry(xrootd.Engine{}), Workloads: workload.NewRegistry(Factory)})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "from site cli against s1") {
		t.Errorf("the client should be the site without a node:\n%s", log.String())
	}
	if sum.Pages == nil || sum.Pages.Pages == 0 || sum.Pages.Pages != sum.Transactions {
		t.Fatalf("pages %+v, transactions %d", sum.Pages, sum.Transactions)
	}
	f, err := os.Open(filepath.Join(out, "pages.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pagestats.ReadCSV(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var measured int64
	for _, r := range rows {
		if r.Measured {
			measured++
		}
		if r.CwndSegments == 0 {
			t.Errorf("page %d has no server TCP state", r.Index)
		}
	}
	if measured != sum.Pages.Pages {
		t.Errorf("pages.csv has %d measured pages, summary.json %d", measured, sum.Pages.Pages)
	}
	// summary.json as written says the same.
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var written report.Summary
	if err := json.Unmarshal(b, &written); err != nil {
		t.Fatal(err)
	}
	if written.Pages == nil || written.Pages.Pages != sum.Pages.Pages || written.Workload != "page-read" {
		t.Errorf("summary.json pages: %+v", written.Pages)
	}

	// The captures: every direction's file, read by tcpdump, holds what the
	// lab says the link delivered over the whole run (the capture starts
	// with the lab and ends with it).
	files, _ := filepath.Glob(filepath.Join(out, "capture-*.pcap"))
	if len(files) != 2 {
		t.Fatalf("capture files: %v", files)
	}
	for _, p := range files {
		cmd := exec.Command("tcpdump", "-nr", p)
		outb, err := cmd.Output()
		if err != nil {
			t.Fatalf("tcpdump -nr %s: %v", p, err)
		}
		lines := strings.Split(strings.TrimSpace(string(outb)), "\n")
		if len(lines) < int(sum.Pages.Pages) {
			t.Errorf("%s: %d packets for %d pages", filepath.Base(p), len(lines), sum.Pages.Pages)
		}
		// TCP from the server's port in capture-srv-cli.pcap, to it in the
		// other (the lab's own check at start-up is UDP).
		srv := strings.HasSuffix(p, "capture-srv-cli.pcap")
		for _, l := range lines {
			if !strings.Contains(l, ": Flags [") {
				continue
			}
			if fromServer := strings.Contains(l, ".1094 > "); fromServer != srv {
				t.Errorf("%s: a packet the other way: %s", filepath.Base(p), l)
				break
			}
		}
	}
}
