// Package benchkit is the scaffolding the benchmark programs under bench/
// share: the JSON report with its figures, the summary table, CPU meters
// read from /proc, the capture of the machine's environment, and the
// selection and running of bounded steps.
package benchkit

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

// Report is the JSON file: the machine (E, each program's Environment),
// then every figure in measuring order.
type Report[E any] struct {
	Environment E       `json:"environment"`
	Figures     Figures `json:"figures"`
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
	CPU     CPUUse  `json:"cpu"`
	OK      bool    `json:"ok"`
}

// StepError is one failed step.
type StepError struct {
	Step  string `json:"step"`
	Error string `json:"error"`
}

// Figure is one measured number (or list), named with its unit, with what
// was configured and what the issue asks for.
type Figure struct {
	Name  string `json:"-"`
	Value any    `json:"value"`
	// Configured holds the setup the figure was measured on, each key
	// named with its unit.
	Configured map[string]any `json:"configured,omitempty"`
	// Expected is what a faithful setup gives, when known.
	Expected *float64 `json:"expected,omitempty"`
	// Target is the target in words; TargetMin/TargetMax as numbers.
	Target    string   `json:"target"`
	TargetMin *float64 `json:"target_min,omitempty"`
	TargetMax *float64 `json:"target_max,omitempty"`
	// MeetsTarget is set when the figure has a target.
	MeetsTarget *bool          `json:"meets_target,omitempty"`
	Note        string         `json:"note,omitempty"`
	Details     map[string]any `json:"details,omitempty"`
}

// NoTarget is the Target of figures the issue gives none for.
const NoTarget = "none (reference figure)"

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

// Add appends f to the report, with NoTarget when it has no Target and
// MeetsTarget set when its float64 value has a numeric target.
func (r *Report[E]) Add(f Figure) {
	if f.Target == "" {
		f.Target = NoTarget
	}
	if v, ok := f.Value.(float64); ok && (f.TargetMin != nil || f.TargetMax != nil) {
		ok := (f.TargetMin == nil || v >= *f.TargetMin) && (f.TargetMax == nil || v <= *f.TargetMax)
		f.MeetsTarget = &ok
	}
	r.Figures = append(r.Figures, f)
}

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// Round keeps JSON readable: n decimals after the point.
func Round(v float64, n int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, float64(n))
	return math.Round(v*p) / p
}

// Summary says how WriteSummary lays out one program's table.
type Summary struct {
	// ConfiguredKeys are the Configured keys that tell the figures apart,
	// in the order shown.
	ConfiguredKeys []string
	// CPUHeading is the line above the per-step CPU lines.
	CPUHeading string
	// IDWidth is the width of the step id column.
	IDWidth int
	// ShowValue formats a figure's value; nil shows float64 values with
	// TrimFloat and others with fmt.Sprint.
	ShowValue func(v any) string
	// Extra, when set, writes more after the figure table.
	Extra func(w io.Writer)
}

// WriteSummary prints one line per figure: measured, configured, target;
// then the CPU use of each step and the failed steps.
func (r *Report[E]) WriteSummary(w io.Writer, s Summary) {
	show := s.ShowValue
	if show == nil {
		show = ShowValue
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tmeasured\tconfigured\ttarget\tmet")
	for _, f := range r.Figures {
		met := "-"
		if f.MeetsTarget != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*f.MeetsTarget]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Name, show(f.Value), ShowConfigured(f.Configured, s.ConfiguredKeys), shortTarget(f), met)
	}
	_ = tw.Flush()
	if s.Extra != nil {
		s.Extra(w)
	}
	fmt.Fprintln(w, s.CPUHeading)
	for _, st := range r.Steps {
		fmt.Fprintf(w, "  %-*s %5.1f s  machine busy %3.0f%%  bench process %.2f cores  other processes %.2f cores\n",
			s.IDWidth, st.ID, st.Seconds, 100*st.CPU.MachineBusy, st.CPU.ProcessCores, st.CPU.OthersCores)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "FAILED %s: %s\n", e.Step, e.Error)
	}
}

// shortTarget fits the target into the summary table.
func shortTarget(f Figure) string {
	switch {
	case f.TargetMin != nil:
		return "≥ " + TrimFloat(*f.TargetMin)
	case f.TargetMax != nil:
		return "≤ " + TrimFloat(*f.TargetMax)
	case f.MeetsTarget != nil:
		return "in 99% CI"
	case f.Target != NoTarget:
		return "see JSON"
	}
	return "-"
}

// ShowValue formats a figure's value for the summary table.
func ShowValue(v any) string {
	if x, ok := v.(float64); ok {
		return TrimFloat(x)
	}
	return fmt.Sprint(v)
}

// ShowConfigured prints the keys of c that tell the figures apart.
func ShowConfigured(c map[string]any, keys []string) string {
	var parts []string
	for _, k := range keys {
		if v, ok := c[k]; ok {
			parts = append(parts, k+"="+fmt.Sprint(v))
		}
	}
	return strings.Join(parts, " ")
}

// TrimFloat prints v with at most 4 decimals and no trailing zeros.
func TrimFloat(v float64) string {
	s := fmt.Sprintf("%.4f", v)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// WriteJSON writes v indented, atomically (temporary file, then rename).
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
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
