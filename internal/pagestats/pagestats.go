// Package pagestats is what a page-read run records per page and what it
// concludes from it: the pages' times in sequence (the object database
// study's Figure 3), and the slow pages — those slower than a factor of
// the median — with their share and their period. TCP's view of the
// client's connection is sampled after each page, so that a slow page can
// be put next to the congestion window that made it slow.
package pagestats

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// Page is one page read.
type Page struct {
	Seq      int64   // completion order, from 0, over the whole run
	Index    int64   // the page's number in the data set (file-major)
	User     int     // the request slot (a driver user) that read it
	Conn     int     // the connection it went over
	StartS   float64 // request sent, seconds since the measure phase began (negative in the warmup)
	TimeMs   float64 // request sent to last byte received
	Bytes    int     // bytes read
	Measured bool    // in the measure phase
	// TCP_INFO of the connection just after the page arrived.
	CwndSegments     uint32
	SsthreshSegments uint32
	RTTMs            float64
	Retransmits      uint32 // total of the connection so far
	CAState          uint8  // 0 open, 1 disorder, 2 cwr, 3 recovery, 4 loss
}

// Slow is the slow-page detector's verdict over the measure phase.
type Slow struct {
	// ThresholdFactor × MedianMs is the time above which a page is slow.
	ThresholdFactor float64 `json:"threshold_factor"`
	MedianMs        float64 `json:"median_ms"`
	ThresholdMs     float64 `json:"threshold_ms"`
	Pages           int64   `json:"pages"`
	SlowPages       int64   `json:"slow_pages"`
	SlowShare       float64 `json:"slow_share"`
	// The period: the gaps between consecutive slow pages, in pages and
	// in seconds (medians), and how regular they are (the gaps'
	// coefficient of variation: near 0 is periodic, near 1 is random).
	// Zero with fewer than two slow pages.
	PeriodPages   float64 `json:"period_pages,omitempty"`
	PeriodS       float64 `json:"period_s,omitempty"`
	PeriodCV      float64 `json:"period_cv,omitempty"`
	SlowMeanMs    float64 `json:"slow_mean_ms,omitempty"`
	OthersMeanMs  float64 `json:"others_mean_ms,omitempty"`
	RetransDuring int64   `json:"retransmits,omitempty"` // over the measure phase, all connections
}

// DefaultFactor flags pages slower than 1.8 times the median.
const DefaultFactor = 1.8

// Detect finds the slow pages among the measured ones (in completion
// order) and marks them in slow (indexed like pages; nil to skip).
func Detect(pages []Page, factor float64, slow []bool) Slow {
	if factor <= 1 {
		factor = DefaultFactor
	}
	out := Slow{ThresholdFactor: factor}
	var times []float64
	for _, p := range pages {
		if p.Measured {
			times = append(times, p.TimeMs)
		}
	}
	if len(times) == 0 {
		return out
	}
	out.Pages = int64(len(times))
	out.MedianMs = median(times)
	out.ThresholdMs = factor * out.MedianMs
	var gapsPages, gapsS []float64
	var slowSum, otherSum float64
	last, lastI := -1, -1 // the previous slow page: its measured number and index in pages
	firstRetrans, lastRetrans := map[int]uint32{}, map[int]uint32{}
	n := 0 // measured pages so far
	for i, p := range pages {
		if !p.Measured {
			continue
		}
		if _, ok := firstRetrans[p.Conn]; !ok {
			firstRetrans[p.Conn] = p.Retransmits
		}
		lastRetrans[p.Conn] = p.Retransmits
		if p.TimeMs > out.ThresholdMs {
			out.SlowPages++
			slowSum += p.TimeMs
			if slow != nil {
				slow[i] = true
			}
			if last >= 0 {
				gapsPages = append(gapsPages, float64(n-last))
				gapsS = append(gapsS, p.StartS-pages[lastI].StartS)
			}
			last, lastI = n, i
		} else {
			otherSum += p.TimeMs
		}
		n++
	}
	for c, r := range lastRetrans {
		out.RetransDuring += int64(r - firstRetrans[c])
	}
	out.SlowShare = float64(out.SlowPages) / float64(out.Pages)
	if out.SlowPages > 0 {
		out.SlowMeanMs = slowSum / float64(out.SlowPages)
	}
	if others := out.Pages - out.SlowPages; others > 0 {
		out.OthersMeanMs = otherSum / float64(others)
	}
	if len(gapsPages) > 0 {
		out.PeriodPages = median(gapsPages)
		out.PeriodS = median(gapsS)
		out.PeriodCV = cv(gapsPages)
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

func cv(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	if mean == 0 {
		return 0
	}
	return math.Sqrt(ss/float64(len(xs)-1)) / mean
}

// header is pages.csv's first line; units in the names.
var header = []string{"seq", "page", "user", "conn", "start_s", "time_ms", "bytes", "measured", "slow",
	"cwnd_segments", "ssthresh_segments", "rtt_ms", "retransmits", "ca_state"}

// WriteCSV writes pages, with the detector's marks, as pages.csv.
func WriteCSV(w io.Writer, pages []Page, slow []bool) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	for i, p := range pages {
		s := slow != nil && slow[i]
		rec := []string{
			strconv.FormatInt(p.Seq, 10), strconv.FormatInt(p.Index, 10), strconv.Itoa(p.User), strconv.Itoa(p.Conn),
			strconv.FormatFloat(p.StartS, 'f', 6, 64), strconv.FormatFloat(p.TimeMs, 'f', 3, 64), strconv.Itoa(p.Bytes),
			b(p.Measured), b(s), strconv.FormatUint(uint64(p.CwndSegments), 10), strconv.FormatUint(uint64(p.SsthreshSegments), 10),
			strconv.FormatFloat(p.RTTMs, 'f', 3, 64), strconv.FormatUint(uint64(p.Retransmits), 10), strconv.Itoa(int(p.CAState)),
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Row is one line of pages.csv as the report reads it.
type Row struct {
	Page
	Slow bool
}

// ReadCSV reads pages.csv back.
func ReadCSV(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || !slices.Equal(recs[0], header) {
		return nil, fmt.Errorf("not a pages.csv: the first line is not %v", header)
	}
	out := make([]Row, 0, len(recs)-1)
	for i, rec := range recs[1:] {
		var p Row
		var errs []error
		i64 := func(s string) int64 { v, err := strconv.ParseInt(s, 10, 64); errs = append(errs, err); return v }
		f64 := func(s string) float64 { v, err := strconv.ParseFloat(s, 64); errs = append(errs, err); return v }
		p.Seq, p.Index = i64(rec[0]), i64(rec[1])
		p.User, p.Conn = int(i64(rec[2])), int(i64(rec[3]))
		p.StartS, p.TimeMs, p.Bytes = f64(rec[4]), f64(rec[5]), int(i64(rec[6]))
		p.Measured, p.Slow = rec[7] == "1", rec[8] == "1"
		p.CwndSegments, p.SsthreshSegments = uint32(i64(rec[9])), uint32(i64(rec[10]))
		p.RTTMs, p.Retransmits, p.CAState = f64(rec[11]), uint32(i64(rec[12])), uint8(i64(rec[13]))
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("pages.csv line %d: %w", i+2, err)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Summary is a page-read measurement in summary.json ("pages").
type Summary struct {
	PageSizeBytes int64   `json:"page_size_bytes"`
	Order         string  `json:"order"`       // sequential or random
	Connections   int     `json:"connections"` // TCP connections to the server
	Users         int     `json:"users"`       // requests in flight, all connections together
	Pages         int64   `json:"pages"`       // read in the measure phase
	PagesPerS     float64 `json:"pages_per_s"`
	ReadBytesPerS float64 `json:"read_bytes_per_s"`
	Slow          Slow    `json:"slow"`
}
