package pagestats

import (
	"bytes"
	"math"
	"testing"
)

// series builds measured pages 1 s apart in start time, each taking the
// given time, on one connection whose retransmission count rises by one
// at every page slower than 300 ms.
func series(times ...float64) []Page {
	var out []Page
	var re uint32
	for i, t := range times {
		if t > 300 {
			re++
		}
		out = append(out, Page{Seq: int64(i), Index: int64(i), StartS: float64(i), TimeMs: t, Measured: true, Retransmits: re})
	}
	return out
}

func TestDetect(t *testing.T) {
	periodic := []float64{}
	for i := range 40 {
		v := 100.0
		if i%8 == 7 {
			v = 400 // a slow page every 8th
		}
		periodic = append(periodic, v)
	}
	warm := series(900, 900, 100, 100, 100, 100)
	warm[0].Measured, warm[1].Measured = false, false // the warmup's slow start is not counted
	for _, c := range []struct {
		name               string
		pages              []Page
		factor             float64
		slow               int64
		median, period, cv float64
		retrans            int64
	}{
		{"none slow", series(100, 101, 99, 100), 1.8, 0, 100, 0, 0, 0},
		{"periodic", series(periodic...), 1.8, 5, 100, 8, 0, 5},
		{"irregular", series(100, 500, 100, 500, 100, 100, 100, 100, 500, 100), 1.8, 3, 100, 3.5, 0.6061, 3},
		{"warmup excluded", warm, 1.8, 0, 100, 0, 0, 0},
		{"factor below one is the default", series(100, 200, 100, 100), 0.5, 1, 100, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			marks := make([]bool, len(c.pages))
			got := Detect(c.pages, c.factor, marks)
			if got.SlowPages != c.slow || got.MedianMs != c.median {
				t.Errorf("slow %d, median %.1f ms; want %d, %.1f", got.SlowPages, got.MedianMs, c.slow, c.median)
			}
			if math.Abs(got.PeriodPages-c.period) > 1e-9 || math.Abs(got.PeriodCV-c.cv) > 1e-3 {
				t.Errorf("period %.3f pages (cv %.4f), want %.3f (cv %.4f)", got.PeriodPages, got.PeriodCV, c.period, c.cv)
			}
			if got.RetransDuring != c.retrans {
				t.Errorf("retransmits %d, want %d", got.RetransDuring, c.retrans)
			}
			var marked int64
			for i, m := range marks {
				if m {
					marked++
					if c.pages[i].TimeMs <= got.ThresholdMs || !c.pages[i].Measured {
						t.Errorf("page %d marked slow at %.1f ms (threshold %.1f)", i, c.pages[i].TimeMs, got.ThresholdMs)
					}
				}
			}
			if marked != got.SlowPages {
				t.Errorf("%d marked, %d counted", marked, got.SlowPages)
			}
			if c.slow > 1 && got.PeriodS != got.PeriodPages {
				t.Errorf("pages are 1 s apart, yet the period is %.2f pages and %.2f s", got.PeriodPages, got.PeriodS)
			}
		})
	}
	if got := Detect(nil, 1.8, nil); got.Pages != 0 || got.SlowShare != 0 {
		t.Errorf("no pages: %+v", got)
	}
}

func TestCSVRoundTrip(t *testing.T) {
	pages := series(100, 400.25, 100)
	pages[1].CwndSegments, pages[1].SsthreshSegments, pages[1].RTTMs, pages[1].CAState = 1, 7, 655.5, 4
	pages[2].Measured = false
	slow := []bool{false, true, false}
	var b bytes.Buffer
	if err := WriteCSV(&b, pages, slow); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	for i, r := range rows {
		if r.Page != pages[i] || r.Slow != slow[i] {
			t.Errorf("row %d: %+v, want %+v slow %v", i, r, pages[i], slow[i])
		}
	}
	if _, err := ReadCSV(bytes.NewBufferString("a,b\n1,2\n")); err == nil {
		t.Error("a CSV that is not pages.csv was read")
	}
}
