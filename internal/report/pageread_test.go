package report

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"replab/internal/pagestats"
)

// The page-read fixtures: pages-r1 and pages-r8 are real runs (one and
// eight requests in flight, no slow pages); pages-slow is pages-r1 with
// eight synthetic slow pages (see testdata/README.md).

func TestPrintSummaryPagesGolden(t *testing.T) {
	for _, dir := range []string{"pages-r1", "pages-r8", "pages-slow"} {
		t.Run(dir, func(t *testing.T) {
			r := mustRead(t, filepath.Join("testdata", dir))
			var b bytes.Buffer
			PrintSummary(&b, r.Summary)
			golden(t, "summary-"+dir+".golden", b.Bytes())
		})
	}
}

// pagesAggregate is the aggregate of pages-r1 and pages-slow as two
// repetitions of one run.
func pagesAggregate(t *testing.T) *Summary {
	t.Helper()
	var sums []*Summary
	for _, d := range []string{"pages-r1", "pages-slow"} {
		var s Summary
		readJSON(t, filepath.Join("testdata", d, "summary.json"), &s)
		sums = append(sums, &s)
	}
	return Aggregate(sums, []string{"rep-01", "rep-02"}, 0.95)
}

func TestPrintSummaryPagesAggregate(t *testing.T) {
	agg := pagesAggregate(t)
	if agg.Pages == nil {
		t.Fatal("the aggregate has no pages")
	}
	if agg.Pages.Pages != 148 || agg.Pages.Slow.SlowPages != 8 {
		t.Errorf("pages %d, slow %d: want the sums 148 and 8", agg.Pages.Pages, agg.Pages.Slow.SlowPages)
	}
	if c, ok := agg.CI["pages.slow.slow_share"]; !ok || c.N != 2 {
		t.Errorf("no CI of pages.slow.slow_share over 2 repetitions: %+v", agg.CI["pages.slow.slow_share"])
	}
	var b bytes.Buffer
	PrintSummary(&b, agg)
	golden(t, "aggregate-pages.golden", b.Bytes())
}

// svgOf is the <svg> of the figure with id in a page.
func svgOf(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `<figure id="fig-`+id+`"`)
	if i < 0 {
		t.Fatalf("no figure %s", id)
	}
	s := svgRE.FindString(page[i:])
	if s == "" {
		t.Fatalf("figure %s has no svg", id)
	}
	return s
}

var (
	pageTimePath = regexp.MustCompile(`<path class="data"[^>]*d="([^"]*)"><title>time per page</title>`)
	cwndPath     = regexp.MustCompile(`<path class="data"[^>]*d="([^"]*)"><title>cwnd[^<]*</title>`)
	slowCircle   = regexp.MustCompile(`<circle class="slow"[^>]*fill="` + slowColour + `"`)
)

// points counts the points of an SVG path (M and L commands).
func points(d string) int { return strings.Count(d, "M") + strings.Count(d, "L") }

func readPagesCSV(t *testing.T, path string) []pagestats.Row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := pagestats.ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func renderDir(t *testing.T, dir string) (*Results, string) {
	t.Helper()
	r, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	return r, b.String()
}

func TestPagesSection(t *testing.T) {
	for _, dir := range []string{"pages-r1", "pages-r8", "pages-slow"} {
		t.Run(dir, func(t *testing.T) {
			rows := readPagesCSV(t, filepath.Join("testdata", dir, "pages.csv"))
			slow := 0
			for _, p := range rows {
				if p.Slow {
					slow++
				}
			}
			_, page := renderDir(t, filepath.Join("testdata", dir))
			if !strings.Contains(page, `<section id="pages">`) {
				t.Fatal("no Pages section")
			}
			for _, w := range []string{"Transfer time per page", "Page reads (measure phase)", "Time per page (ms)", "Page time p99",
				"warmup", "cooldown", fmt.Sprintf("Every one of the %d pages is drawn.", len(rows))} {
				if !strings.Contains(page, w) {
					t.Errorf("page does not show %q", w)
				}
			}
			ts := svgOf(t, page, "page-time")
			m := pageTimePath.FindStringSubmatch(ts)
			if m == nil {
				t.Fatal("page-time has no path of the page times")
			}
			if n := points(m[1]); n != len(rows) {
				t.Errorf("page-time draws %d points, pages.csv has %d pages", n, len(rows))
			}
			if n := len(slowCircle.FindAllString(ts, -1)); n != slow {
				t.Errorf("page-time marks %d slow pages in red, pages.csv has %d", n, slow)
			}
			cs := svgOf(t, page, "page-cwnd")
			drawn := 0
			for _, m := range cwndPath.FindAllStringSubmatch(cs, -1) {
				drawn += points(m[1])
			}
			if drawn != len(rows) {
				t.Errorf("page-cwnd draws %d points, pages.csv has %d pages", drawn, len(rows))
			}
			if n := len(slowCircle.FindAllString(cs, -1)); n != slow {
				t.Errorf("page-cwnd marks %d slow pages, pages.csv has %d", n, slow)
			}
		})
	}
	t.Run("slow pages and their threshold", func(t *testing.T) {
		_, page := renderDir(t, filepath.Join("testdata", "pages-slow"))
		ts := svgOf(t, page, "page-time")
		if !strings.Contains(page, "slow above 1.8 × median = 242.88 ms") || !strings.Contains(ts, `stroke="`+slowColour+`" stroke-width="1.2" stroke-dasharray="6 3"`) {
			t.Error("no dashed red threshold line at 242.88 ms")
		}
		if !strings.Contains(ts, "<title>page 20 (seq 20): 464.88 ms, cwnd 1 segments</title>") {
			t.Error("the first slow page's marker does not name it")
		}
		if !strings.Contains(page, "ssthresh") {
			t.Error("the cwnd chart does not draw ssthresh once it is set")
		}
	})
}

func TestDecimate(t *testing.T) {
	all := decimate(5, 10, func(int) bool { return false }, func(int) float64 { return 0 })
	if len(all) != 5 {
		t.Errorf("under the bound: %v, want every index", all)
	}
	// 100 points to at most 10: runs of 10, the highest of each, and
	// index 37 (kept) instead of run 3's highest.
	score := func(i int) float64 { return float64(i % 10) }
	got := decimate(100, 10, func(i int) bool { return i == 37 || i == 38 }, score)
	want := []int{9, 19, 29, 37, 38, 49, 59, 69, 79, 89, 99}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("decimate = %v, want %v", got, want)
	}
}

// TestPagesDecimated renders a long run: each chart draws at most
// maxPagePoints points a line besides the slow pages, and every slow page.
func TestPagesDecimated(t *testing.T) {
	dir := fixture(t, "pages-r1")
	const n, every = 23456, 997
	pages := make([]pagestats.Page, n)
	slow := make([]bool, n)
	slowN := 0
	for i := range pages {
		pages[i] = pagestats.Page{Seq: int64(i), Index: int64(i), Conn: i % 2, StartS: float64(i-1000) * 0.01, TimeMs: 100 + float64(i%7),
			Bytes: 8192, Measured: i >= 1000, CwndSegments: uint32(10 + i%5), SsthreshSegments: unsetSsthresh}
		if i%every == 500 {
			pages[i].TimeMs, pages[i].CwndSegments, slow[i] = 900, 1, true
			slowN++
		}
	}
	var b bytes.Buffer
	if err := pagestats.WriteCSV(&b, pages, slow); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pages.csv"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, page := renderDir(t, dir)
	ts := svgOf(t, page, "page-time")
	m := pageTimePath.FindStringSubmatch(ts)
	if m == nil {
		t.Fatal("no page times")
	}
	if got := points(m[1]); got > maxPagePoints+slowN || got < maxPagePoints/2 {
		t.Errorf("page-time draws %d points of %d pages, want at most %d", got, n, maxPagePoints+slowN)
	}
	if got := len(slowCircle.FindAllString(ts, -1)); got != slowN {
		t.Errorf("%d slow pages marked, want every one of %d", got, slowN)
	}
	for _, s := range []string{"pages drawn (at most 5,000 a line)", "pages drawn (at most 2,500 a line)", "of 23,456 pages"} {
		if !strings.Contains(page, s) {
			t.Errorf("page does not say %q", s)
		}
	}
	cs := svgOf(t, page, "page-cwnd")
	for _, m := range cwndPath.FindAllStringSubmatch(cs, -1) {
		if got := points(m[1]); got > maxPagePoints/2+slowN {
			t.Errorf("a cwnd line draws %d points", got)
		}
	}
}

func TestPagesMalformed(t *testing.T) {
	for _, tc := range []struct {
		name, csv, says string
	}{
		{"not a pages.csv", "a,b,c\n1,2,3\n", "not a pages.csv"},
		{"a short row", "seq,page,user,conn,start_s,time_ms,bytes,measured,slow,cwnd_segments,ssthresh_segments,rtt_ms,retransmits,ca_state\n0,0,0,0,1.0,135\n", "wrong number of fields"},
		{"a bad number", "seq,page,user,conn,start_s,time_ms,bytes,measured,slow,cwnd_segments,ssthresh_segments,rtt_ms,retransmits,ca_state\n0,0,0,0,1.0,fast,8192,1,0,10,5,100,0,0\n", "line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixture(t, "pages-r1")
			if err := os.WriteFile(filepath.Join(dir, "pages.csv"), []byte(tc.csv), 0o644); err != nil {
				t.Fatal(err)
			}
			r, page := renderDir(t, dir)
			if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "pages.csv") {
				t.Errorf("problems %q, want one about pages.csv", r.Problems)
			}
			i := strings.Index(page, `<section id="pages">`)
			if i < 0 {
				t.Fatal("no Pages section")
			}
			sec := page[i : i+strings.Index(page[i:], "</section>")]
			if !strings.Contains(sec, "pages.csv could not be read") || !strings.Contains(sec, tc.says) {
				t.Errorf("the Pages section does not say what was wrong (%q):\n%s", tc.says, sec)
			}
			if !strings.Contains(sec, "Page reads (measure phase)") {
				t.Error("the pages table from summary.json is missing")
			}
			for _, id := range []string{"throughput", "latency-time", "latency-cdf", "link-util", "roles"} {
				if !strings.Contains(page, `<figure id="fig-`+id+`"`) {
					t.Errorf("the rest of the report lacks %s", id)
				}
			}
			if strings.Contains(page, `id="fig-page-time"`) {
				t.Error("a page chart was drawn from a bad pages.csv")
			}
		})
	}
	t.Run("no pages.csv", func(t *testing.T) {
		dir := fixture(t, "pages-r1")
		if err := os.Remove(filepath.Join(dir, "pages.csv")); err != nil {
			t.Fatal(err)
		}
		r, page := renderDir(t, dir)
		if len(r.Problems) != 0 {
			t.Errorf("problems %q", r.Problems)
		}
		if !strings.Contains(page, "This directory has no pages.csv") {
			t.Error("the Pages section does not say pages.csv is missing")
		}
	})
	t.Run("other workloads have no Pages section", func(t *testing.T) {
		_, page := renderDir(t, filepath.Join("testdata", "run"))
		if strings.Contains(page, `<section id="pages">`) || strings.Contains(page, "Time per page") {
			t.Error("a run without pages shows a Pages section")
		}
	})
}

func TestComparePages(t *testing.T) {
	read := func(dirs ...string) *Comparison {
		var rs []*Results
		for _, d := range dirs {
			r := mustRead(t, filepath.Join("testdata", d))
			r.Dir = d
			rs = append(rs, r)
		}
		c, err := Compare(rs, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := read("pages-r1", "pages-slow")
	var b bytes.Buffer
	PrintCompare(&b, c)
	golden(t, "compare-pages.golden", b.Bytes())
	// Only page-read runs have the pages rows.
	for _, row := range read("pages-r1", "run").Rows {
		if strings.HasPrefix(row.Metric, "pages") || strings.HasPrefix(row.Metric, "slow") {
			t.Errorf("a comparison with a run of another workload has row %q", row.Metric)
		}
	}
}

// pagesRepsDir is a repeated page-read run: pages-r1 and pages-slow as
// rep-01 and rep-02, the top-level summary.json their aggregate.
func pagesRepsDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pages-reps")
	copyDir(t, filepath.Join("testdata", "pages-r1"), filepath.Join(dir, "rep-01"))
	copyDir(t, filepath.Join("testdata", "pages-slow"), filepath.Join(dir, "rep-02"))
	if err := (&Dir{Path: dir}).WriteJSON("summary.json", pagesAggregate(t)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPagesRepetitionsAndCompareHTML(t *testing.T) {
	dir := pagesRepsDir(t)
	r := mustRead(t, dir)
	paths, err := WriteReport(r)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, w := range []string{`<section id="pages">`, "Page reads (measure phase): means of 2 repetitions", "Mean pages read",
		"Pages, slow pages and retransmissions are sums over the repetitions", "rep-02/report.html"} {
		if !strings.Contains(page, w) {
			t.Errorf("the repetitions page does not show %q", w)
		}
	}
	// The slow share is a mean with its interval; the slow pages a sum.
	if !strings.Contains(page, `title="mean of 2 repetitions ± `) || !strings.Contains(page, `<td class="">slow pages</td><td class="n">8</td>`) {
		t.Error("the pages table does not show means with intervals and the slow pages' sum")
	}
	for _, p := range paths {
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
	if rep2, err := os.ReadFile(filepath.Join(dir, "rep-02", ReportFile)); err != nil || !bytes.Contains(rep2, []byte(`id="fig-page-time"`)) {
		t.Errorf("rep-02's report has no page chart (%v)", err)
	}

	// compare: the repeated run against a single one, as text and HTML.
	one := mustRead(t, filepath.Join("testdata", "pages-r8"))
	c, err := Compare([]*Results{one, r}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, row := range c.Rows {
		rows = append(rows, row.Metric)
		if row.Metric == "slow pages %" {
			if v := row.Values[1]; v.N != 2 || math.Abs(v.Value-100*4/74.0) > 0.01 {
				t.Errorf("slow pages %% of the repetitions: %+v, want the mean of 0 and 10.81 over 2", v)
			}
		}
	}
	if !slices.Contains(rows, "pages/s") || !slices.Contains(rows, "slow pages %") {
		t.Errorf("compare rows %q lack the pages figures", rows)
	}
	var h bytes.Buffer
	if err := WriteCompareHTML(&h, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.String(), "slow pages %") {
		t.Error("the comparison page lacks the slow pages row")
	}
}
