package monitor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// csvFile is a CSV series written as it grows, so an interrupted run
// keeps what was sampled.
type csvFile struct {
	f   *os.File
	w   *bufio.Writer
	err error
}

func createCSV(path, header string) (*csvFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("monitor: create %s: %w", filepath.Base(path), err)
	}
	c := &csvFile{f: f, w: bufio.NewWriter(f)}
	c.printf("%s\n", header)
	return c, nil
}

func (c *csvFile) printf(format string, args ...any) {
	if c.err == nil {
		_, c.err = fmt.Fprintf(c.w, format, args...)
	}
}

func (c *csvFile) flush() {
	if c.err == nil {
		c.err = c.w.Flush()
	}
}

func (c *csvFile) close() error {
	if c == nil {
		return nil
	}
	c.flush()
	if err := c.f.Close(); c.err == nil {
		c.err = err
	}
	if c.err != nil {
		return fmt.Errorf("monitor: write %s: %w", filepath.Base(c.f.Name()), c.err)
	}
	return nil
}

// csvField quotes a field that holds a comma, a quote or a line break
// (an upstream list "m1,m2", an engine's state words), as RFC 4180 says.
func csvField(s string) string {
	if !strings.ContainsAny(s, ",\"\n\r") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
