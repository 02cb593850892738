package report

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"replab/internal/testkit"
	"slices"
	"strings"
	"testing"
	"time"
)

var screenshots = flag.String("screenshots", "", "save the headless-Chromium screenshots of the test reports in this directory")

// page fixtures and the charts each report must show, by figure id.
type reportCase struct {
	name    string
	dir     func(t *testing.T) string
	charts  []string
	missing []string // substrings of the "Not shown" list
	text    []string // must appear in the page
	browser bool     // also load it in Chromium (one page of each kind)
}

var reportCases = []reportCase{
	{
		name: "a run with every monitor",
		dir:  func(t *testing.T) string { return fixture(t, "run") },
		charts: []string{"throughput", "latency-time", "latency-cdf", "lag-time", "lag-cdf", "repl-bytes",
			"link-util", "roles"},
		text: []string{"quickstart", "complete", "keeping up", "B / transaction", "p1 · backend", "primary-&gt;asia",
			"AMD EPYC", "postgres 15.18"},
		browser: true,
	},
	{
		name: "a run with faults (faults_test.go checks the marks)",
		dir:  func(t *testing.T) string { return fixture(t, "faults") },
		charts: []string{"throughput", "latency-time", "latency-cdf", "lag-time", "lag-cdf", "repl-bytes",
			"link-util", "roles"},
		text:    []string{"quickstart-faults", "Faults", "not within the run", "e1 kill", "a1 pause (heal failed)"},
		browser: true,
	},
	{
		name: "a run that recorded its history (consistency_test.go checks the section)",
		dir:  consistencyFixture,
		charts: []string{"anomalies-time", "throughput", "latency-time", "latency-cdf", "lag-time", "lag-cdf", "repl-bytes",
			"link-util", "roles"},
		text: []string{"quickstart-anomalies", "Anomalies by class", "G2-item", `<pre class="witness">G-single: a cycle of 2 transactions`,
			"T2 -rw-&gt; T1: T2 read key 1 as [], T1 appended 10 to key 1, its first element"},
	},
	{
		name:    "a run from before the monitors",
		dir:     withoutMonitors,
		charts:  []string{"throughput", "latency-time", "latency-cdf", "lag-time", "lag-cdf", "link-util"},
		missing: []string{"no replication.csv", "no roles in summary.json and no roles.csv"},
	},
	{
		name: "summary.json alone",
		dir: func(t *testing.T) string {
			dir := filepath.Join(t.TempDir(), "bare")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			copyDir(t, filepath.Join("testdata", "run", "summary.json"), filepath.Join(dir, "summary.json"))
			return dir
		},
		charts:  []string{"roles"}, // from summary.json's roles
		missing: []string{"no series.csv", "no latency.hlog", "no lag.csv", "no links.csv", "no replication.csv"},
		text:    []string{"Throughput", "Commit latency (ms)"},
	},
	{
		name:   "repetitions",
		dir:    func(t *testing.T) string { return fixture(t, "reps-async") },
		charts: []string{"rep-tpm", "rep-throughput", "rep-latency-cdf", "rep-lag-cdf", "link-util"},
		text: []string{"3 repetitions", "rep-01/report.html", "95 %", "confidence interval of the mean",
			"written before replab averaged every figure"},
		browser: true,
	},
	{
		name:   "repetitions aggregated by report.Aggregate",
		dir:    reAggregated,
		charts: []string{"rep-tpm", "rep-throughput", "rep-latency-cdf", "rep-lag-cdf", "link-util"},
		// p99.9 25.81 is the mean of 20.43, 29.87 and 27.12; link bytes and
		// CPU s carry their CI; verdicts are tallied.
		text: []string{"Commit latency (ms): means of 3 repetitions", "<td class=\"n\" title=\"mean of 3 repetitions ± 12.06 (95 % confidence)\">25.81</td>",
			"959.2 KiB ± 162.6 KiB", "keeping up (3 of 3 repetitions)", "0.90 ± 0.57", "Where the time goes"},
	},
	{
		name:    "a page-read run with slow pages",
		dir:     func(t *testing.T) string { return fixture(t, "pages-slow") },
		charts:  []string{"page-time", "page-cwnd", "throughput", "latency-time", "latency-cdf", "link-util", "roles"},
		text:    []string{"Transfer time per page", "slow page (8)", "slow above 1.8 × median = 242.88 ms", "Page reads (measure phase)", "Pages read", "59.2 KiB/s"},
		browser: true,
	},
	{
		name:   "a page-read run with 8 requests in flight",
		dir:    func(t *testing.T) string { return fixture(t, "pages-r8") },
		charts: []string{"page-time", "page-cwnd", "throughput", "latency-time", "latency-cdf", "link-util", "roles"},
		text:   []string{"231.2 KiB/s", "Every one of the 405 pages is drawn."},
	},
	{
		name:    "a two-dimensional sweep",
		dir:     func(t *testing.T) string { return fixture(t, "sweep") },
		charts:  []string{"sweep-tpm", "sweep-latency", "sweep-lag", "sweep-bytes"},
		text:    []string{"run.users × scheme.replication", "p04/report.html", "scheme.replication=sync"},
		browser: true,
	},
}

// reAggregated is testdata/reps-async with its summary.json rewritten by
// Aggregate from its repetitions.
func reAggregated(t *testing.T) string {
	dir := fixture(t, "reps-async")
	sums, dirs := repSums(t, "reps-async")
	if err := (&Dir{Path: dir}).WriteJSON("summary.json", Aggregate(sums, dirs, 0.95)); err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	figureRE  = regexp.MustCompile(`<figure id="fig-([^"]+)"`)
	svgRE     = regexp.MustCompile(`(?s)<svg\b.*?</svg>`)
	dataPathD = regexp.MustCompile(`<path\b[^>]*\bclass="data[^"]*"[^>]*\bd="([^"]*)"`)
	// networkRef is anything a browser would fetch: scripts, styles, images, fonts.
	networkRef = regexp.MustCompile(`(?i)(src=|href=|url\(|@import)\s*["']?(https?:)?//`)
)

// badText is what a broken page would show: unformatted numbers, template
// or fmt failures, unreadable files.
var badText = []string{"NaN", "+Inf", "-Inf", "%!", "<no value>", "ZgotmplZ", `id="problems"`, "undefined"}

// checkPage asserts a rendered page has exactly the expected charts, each
// with drawn data, and no error text.
func checkPage(t *testing.T, page string, tc reportCase) {
	t.Helper()
	if !strings.Contains(page, "</main>") || !strings.Contains(page, "Rendered by") {
		t.Fatalf("page is not complete:\n%.500s", page)
	}
	var ids []string
	for _, m := range figureRE.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	if !slices.Equal(ids, tc.charts) {
		t.Errorf("charts %q, want %q", ids, tc.charts)
	}
	svgs := svgRE.FindAllString(page, -1)
	if len(svgs) != len(tc.charts) {
		t.Errorf("%d <svg> elements, want %d", len(svgs), len(tc.charts))
	}
	for i, s := range svgs {
		ds := dataPathD.FindAllStringSubmatch(s, -1)
		if len(ds) == 0 {
			t.Errorf("chart %d has no data path", i)
		}
		for _, d := range ds {
			if len(d[1]) < 4 || !strings.HasPrefix(d[1], "M") {
				t.Errorf("chart %d has an empty data path %q", i, d[1])
			}
		}
	}
	for _, bad := range badText {
		if strings.Contains(page, bad) {
			i := strings.Index(page, bad)
			t.Errorf("page shows %q: …%s…", bad, page[max(0, i-120):min(len(page), i+80)])
		}
	}
	for _, m := range tc.missing {
		if !strings.Contains(page, m) {
			t.Errorf(`"Not shown" does not say %q`, m)
		}
	}
	for _, w := range tc.text {
		if !strings.Contains(page, w) {
			t.Errorf("page does not show %q", w)
		}
	}
}

func TestHTMLReport(t *testing.T) {
	for _, tc := range reportCases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRead(t, tc.dir(t))
			paths, err := WriteReport(r)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(paths[0])
			if err != nil {
				t.Fatal(err)
			}
			checkPage(t, string(b), tc)
			if s := r.Summary; s != nil && !strings.Contains(string(b), group(s.TPM)) {
				t.Errorf("page does not show the tpm, %s", group(s.TPM))
			}
			if refs := networkRef.FindString(string(b)); refs != "" {
				t.Errorf("page fetches from the network: %s", refs)
			}
			for _, p := range paths[1:] {
				sub, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				for _, bad := range badText {
					if bytes.Contains(sub, []byte(bad)) {
						t.Errorf("%s shows %q", p, bad)
					}
				}
			}
		})
	}
}

// chromium runs headless Chromium on a page with extra arguments and
// returns its standard output.
func chromium(t *testing.T, bin, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a bound: it takes seconds, more on a busy machine
	defer cancel()
	all := append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
		"--disable-extensions", "--disable-background-networking", "--disable-sync", "--disable-dev-shm-usage",
		"--disable-features=Translate,MediaRouter", "--user-data-dir=" + t.TempDir()}, args...)
	all = append(all, "file://"+page)
	cmd := exec.CommandContext(ctx, bin, all...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, errb.String())
	}
	return out.Bytes()
}

// TestHTMLReportInChromium loads each report in headless Chromium (Debian's
// chromium package): the page parses and lays out, shows its charts with
// their data, and a screenshot is not blank.
func TestHTMLReportInChromium(t *testing.T) {
	testkit.Need(t, testkit.Chromium)
	bin, _ := exec.LookPath("chromium")
	for _, tc := range reportCases {
		if !tc.browser {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := mustRead(t, tc.dir(t))
			paths, err := WriteReport(r)
			if err != nil {
				t.Fatal(err)
			}
			abs, err := filepath.Abs(paths[0])
			if err != nil {
				t.Fatal(err)
			}
			shot := filepath.Join(t.TempDir(), "report.png")
			dom := chromium(t, bin, abs, "--dump-dom", "--screenshot="+shot, "--window-size=1400,1400")
			checkPage(t, string(dom), tc)
			checkScreenshot(t, shot)
			if *screenshots != "" {
				name := strings.NewReplacer(" ", "-", "/", "-").Replace(tc.name) + ".png"
				b, err := os.ReadFile(shot)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(*screenshots, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// checkScreenshot asserts the page drew something: a fair share of
// non-white pixels, some of them the charts' first colour (#0072B2).
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	var ink, blue, total int
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			total++
			if r < 235 || g < 235 || bl < 235 {
				ink++
			}
			if near(r, 0x00) && near(g, 0x72) && near(bl, 0xB2) {
				blue++
			}
		}
	}
	if share := float64(ink) / float64(total); share < 0.02 {
		t.Errorf("screenshot is almost blank: %.1f %% of pixels drawn", 100*share)
	}
	if blue < 20 {
		t.Errorf("screenshot has %d pixels of the charts' blue: %s", blue, fmt.Sprint(path))
	}
}

func near(v, want uint32) bool { return v+24 >= want && v <= want+24 }
