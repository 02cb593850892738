package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// Report is the JSON file: the machine, then every figure in measuring order.
type Report struct {
	Environment Environment `json:"environment"`
	Figures     Figures     `json:"figures"`
	// Steps says how long each step took and how busy the machine was.
	Steps []StepInfo `json:"steps"`
	// Errors lists the steps that failed; their figures are missing.
	Errors []StepError `json:"errors,omitempty"`
	// Seconds is how long the whole run took.
	Seconds float64 `json:"seconds"`
}

// StepInfo is one step's run.
type StepInfo struct {
	ID      string  `json:"id"`
	Title   string  `json:"title"`
	Seconds float64 `json:"seconds"`
	CPU     cpuUse  `json:"cpu"`
	OK      bool    `json:"ok"`
}

// StepError is one failed step.
type StepError struct {
	Step  string `json:"step"`
	Error string `json:"error"`
}

// Figure is one measured number, named with its unit, with what was
// configured and what the issue asks for.
type Figure struct {
	Name  string  `json:"-"`
	Value float64 `json:"value"`
	// Configured holds the setup the figure was measured on, each key
	// named with its unit.
	Configured map[string]any `json:"configured,omitempty"`
	Expected   *float64       `json:"expected,omitempty"`
	// Target is the target in words; TargetMin/TargetMax as numbers.
	Target      string         `json:"target"`
	TargetMin   *float64       `json:"target_min,omitempty"`
	TargetMax   *float64       `json:"target_max,omitempty"`
	MeetsTarget *bool          `json:"meets_target,omitempty"`
	Note        string         `json:"note,omitempty"`
	Details     map[string]any `json:"details,omitempty"`
}

// noTarget is the Target of figures the issue gives none for.
const noTarget = "none (reference figure)"

// Figures keep their order in the JSON object.
type Figures []Figure

// MarshalJSON writes an object whose keys are the figure names, in order.
func (fs Figures) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f)
		if err != nil {
			return nil, fmt.Errorf("figure %s: %w", f.Name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (r *Report) add(f Figure) {
	if f.Target == "" {
		f.Target = noTarget
	}
	if f.TargetMin != nil || f.TargetMax != nil {
		ok := (f.TargetMin == nil || f.Value >= *f.TargetMin) && (f.TargetMax == nil || f.Value <= *f.TargetMax)
		f.MeetsTarget = &ok
	}
	r.Figures = append(r.Figures, f)
}

func ptr[T any](v T) *T { return &v }

// round keeps JSON readable: n decimals after the point.
func round(v float64, n int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, float64(n))
	return math.Round(v*p) / p
}

// WriteSummary prints one line per figure: measured, configured, target.
func (r *Report) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmeasured\tconfigured\ttarget\tmet")
	for _, f := range r.Figures {
		met := "-"
		if f.MeetsTarget != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*f.MeetsTarget]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Name, trimFloat(f.Value), showConfigured(f.Configured), shortTarget(f), met)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nCPU per step (setup times stretch when other work shares the machine):")
	for _, s := range r.Steps {
		fmt.Fprintf(w, "  %-10s %5.1f s  machine busy %3.0f%%  bench process %.2f cores  other processes %.2f cores\n",
			s.ID, s.Seconds, 100*s.CPU.MachineBusy, s.CPU.ProcessCores, s.CPU.OthersCores)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "FAILED %s: %s\n", e.Step, e.Error)
	}
}

func shortTarget(f Figure) string {
	switch {
	case f.TargetMin != nil:
		return "≥ " + trimFloat(*f.TargetMin)
	case f.TargetMax != nil:
		return "≤ " + trimFloat(*f.TargetMax)
	case f.Target != noTarget:
		return "see JSON"
	}
	return "-"
}

// showConfigured prints the keys that tell the figures apart.
func showConfigured(c map[string]any) string {
	keys := []string{"link", "standbys", "repetitions"}
	var parts []string
	for _, k := range keys {
		if v, ok := c[k]; ok {
			parts = append(parts, k+"="+fmt.Sprint(v))
		}
	}
	return strings.Join(parts, " ")
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.4f", v)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// writeJSON writes the report atomically (temporary file, then rename).
func writeJSON(path string, r *Report) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("write report: %w", err), os.Remove(tmp))
	}
	return nil
}
