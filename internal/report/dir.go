package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/driver"
)

// Dir is a results directory being written.
type Dir struct {
	Path string
}

// NewDir creates a results directory; "" picks results/<timestamp>-<name>.
func NewDir(path, name string) (*Dir, error) {
	if path == "" {
		path = filepath.Join("results", time.Now().Format("20060102-150405")+"-"+name)
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create results directory: %w", err)
	}
	return &Dir{Path: path}, nil
}

// File returns the path of a file in the directory.
func (d *Dir) File(name string) string { return filepath.Join(d.Path, name) }

// WriteJSON writes v as indented JSON.
func (d *Dir) WriteJSON(name string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keys like "primary->eu" stay readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	tmp := d.File(name + ".tmp")
	if err := os.WriteFile(tmp, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return os.Rename(tmp, d.File(name))
}

// CopyFile copies src into the directory as name.
func (d *Dir) CopyFile(src, name string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(d.File(name), b, 0o644)
}

// WriteSeries writes the driver's per-second series as CSV.
func (d *Dir) WriteSeries(series []driver.Second) error {
	var b strings.Builder
	b.WriteString("t_s,phase,commits,errors,latency_p50_ms,latency_p99_ms,latency_max_ms\n")
	for _, s := range series {
		fmt.Fprintf(&b, "%d,%s,%d,%d,%.3f,%.3f,%.3f\n", s.T, s.Phase, s.Commits, s.Errors, s.P50Ms, s.P99Ms, s.MaxMs)
	}
	return os.WriteFile(d.File("series.csv"), []byte(b.String()), 0o644)
}

// WriteHistLog writes histograms (µs) in the HdrHistogram log format, one
// interval each, tagged with their names.
func (d *Dir) WriteHistLog(name string, hists map[string]*hdrhistogram.Histogram) error {
	f, err := os.Create(d.File(name))
	if err != nil {
		return err
	}
	defer f.Close()
	w := hdrhistogram.NewHistogramLogWriter(f)
	_ = w.OutputComment("replab: values in microseconds")
	keys := make([]string, 0, len(hists))
	for k := range hists {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h := hists[k]
		if h == nil {
			continue
		}
		h.SetTag(k)
		if err := w.OutputIntervalHistogram(h); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}
