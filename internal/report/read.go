package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/HdrHistogram/hdrhistogram-go"

	"replab/internal/check"
	"replab/internal/fault"
	"replab/internal/pagestats"
)

// Results is a results directory read back: everything a report or a
// comparison is drawn from. Files other than summary.json are optional;
// a missing one leaves its field empty, an unreadable one adds a Problem.
type Results struct {
	Dir     string
	Summary *Summary // nil for a sweep without a top-level summary.json
	Env     *Environment

	Series      []SeriesRow
	Lag         []LagRow
	Links       []LinkRow
	Roles       []RoleRow
	Replication []ReplicationRow
	// Hists are latency.hlog's intervals by tag (commit_latency,
	// type_<name>, lag_<replica>), values in µs.
	Hists map[string]*hdrhistogram.Histogram
	// Pages is pages.csv (a page-read run: every page in completion
	// order); PagesError says why it could not be read ("" when it was,
	// or when there is none). A bad pages.csv is also a Problem.
	Pages      []pagestats.Row
	PagesError string
	// Faults is faults.csv (every fault applied and healed); FaultsError
	// says why it could not be read (also a Problem).
	Faults      []fault.Event
	FaultsError string
	// Check is check.json (the verdict on the run's history) and
	// Anomalies anomalies.csv, when the run recorded its history.
	Check     *check.Result
	Anomalies []AnomalyRow
	// NodeRoles is node-roles.csv: who was primary over time (a run on
	// an HA manager).
	NodeRoles []NodeRoleRow
	// Stale is stale_reads.csv: every stale read, when the run computed
	// them.
	Stale []StaleRow
	// WarmupS is resolved-spec.json's warmup, when it is there: where the
	// measure phase began when series.csv cannot tell.
	WarmupS *float64

	// Reps are the repetitions (rep-NN/), in order, when the run repeated.
	Reps []*Results
	// Sweep is sweep.json; Points[i] is Sweep.Points[i]'s directory (nil
	// when it could not be read, see Problems).
	Sweep  *Sweep
	Points []*Results

	// Problems lists files that exist but could not be read.
	Problems []string

	// role says what a point or repetition is within its parent directory
	// ("sweep point run.users=3", "repetition rep-02 of 5"), for its report.
	role string
}

// SeriesRow is one second of series.csv; T is the second's end.
type SeriesRow struct {
	T                   float64
	Phase               string
	Commits, Errors     float64
	P50Ms, P99Ms, MaxMs float64
}

// LagRow is one second of one replica in lag.csv; T is the second's start.
type LagRow struct {
	T                   float64
	Replica             string
	Observed            float64
	P50Ms, P99Ms, MaxMs float64
}

// LinkRow is one sample of one direction in links.csv (cumulative counters).
type LinkRow struct {
	T                                       float64
	Direction                               string
	DeliveredBytes, DeliveredPackets        float64
	DroppedQueue, DroppedLoss, DroppedOther float64
	QueueBytes, RateBps                     float64
}

// RoleRow is one sample of roles.csv (cumulative CPU and I/O wait).
type RoleRow struct {
	T                         float64
	Node, Role                string
	CPUUserS, CPUSysS, IOWait float64
	RSSBytes                  float64
}

// ReplicationRow is one sample of replication.csv: the engine's view.
type ReplicationRow struct {
	T                float64
	Node, From, Kind string
	State            string
	Backlog          float64 // in BacklogUnit
	BacklogUnit      string  // bytes, transactions, write-sets
	ReplayLagMs      float64
}

// ReadResults reads the results directory dir: a single run, the aggregate of
// repetitions (rep-NN/) or a sweep (sweep.json and a directory per point).
func ReadResults(dir string) (*Results, error) {
	return load(dir, 0)
}

func load(dir string, depth int) (*Results, error) {
	r := &Results{Dir: dir}
	sweepErr := r.readSweep(depth)
	if sweepErr != nil {
		return nil, sweepErr
	}
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	switch {
	case errors.Is(err, fs.ErrNotExist) && r.Sweep != nil:
	case err != nil:
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read results %s: no summary.json (is it a results directory?)", dir)
		}
		return nil, fmt.Errorf("read results %s: %w", dir, err)
	default:
		r.Summary = &Summary{}
		if err := json.Unmarshal(b, r.Summary); err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, "summary.json"), err)
		}
	}
	r.readEnv()
	r.Series = readRows(r, "series.csv", parseSeries)
	r.Lag = readRows(r, "lag.csv", parseLag)
	r.Links = readRows(r, "links.csv", parseLink)
	r.Roles = readRows(r, "roles.csv", parseRole)
	r.Replication = readRows(r, "replication.csv", parseReplication)
	r.readHists()
	r.readPages()
	r.readFaults()
	r.readCheck()
	r.Anomalies = readRows(r, AnomaliesFile, parseAnomaly)
	r.readNodeRoles()
	r.Stale = readRows(r, StaleReadsFile, parseStale)
	r.readWarmup()
	if depth == 0 {
		r.readReps()
	}
	return r, nil
}

func (r *Results) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Results) file(name string) string { return filepath.Join(r.Dir, name) }

// readOptional parses a file of the results directory that only some
// runs have: a missing one gives the zero value and no error; any other
// failure is also a Problem, and its text is returned.
func readOptional[T any](r *Results, name string, parse func(io.Reader) (T, error)) (T, string) {
	var zero T
	f, err := os.Open(r.file(name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return zero, ""
		}
		r.problem("%s: %v", name, err)
		return zero, err.Error()
	}
	defer f.Close()
	v, err := parse(f)
	if err != nil {
		r.problem("%s: %v", name, err)
		return zero, err.Error()
	}
	return v, ""
}

func (r *Results) readEnv() {
	b, err := os.ReadFile(r.file("environment.json"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.problem("environment.json: %v", err)
		}
		if r.Summary != nil {
			r.Env = &r.Summary.Environment
		}
		return
	}
	var e Environment
	if err := json.Unmarshal(b, &e); err != nil {
		r.problem("environment.json: %v", err)
		return
	}
	r.Env = &e
}

func (r *Results) readSweep(depth int) error {
	b, err := os.ReadFile(r.file("sweep.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", r.file("sweep.json"), err)
	}
	var s Sweep
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("read %s: %w", r.file("sweep.json"), err)
	}
	r.Sweep = &s
	if depth > 0 {
		return nil
	}
	r.Points = make([]*Results, len(s.Points))
	for i, p := range s.Points {
		if p.Dir == "" {
			continue
		}
		pr, err := load(filepath.Join(r.Dir, p.Dir), depth+1)
		if err != nil {
			r.problem("point %s: %v", p.Label, err)
			continue
		}
		pr.readReps()
		pr.role = "sweep point " + p.Label
		r.Points[i] = pr
	}
	return nil
}

// readReps loads rep-NN/ directories: those listed in summary.json, or
// else every rep-* directory present.
func (r *Results) readReps() {
	var dirs []string
	var refs []Repetition
	if r.Summary != nil {
		refs = r.Summary.Repetitions
	}
	for _, ref := range refs {
		if ref.Dir != "" {
			dirs = append(dirs, ref.Dir)
		}
	}
	if len(dirs) == 0 {
		m, _ := filepath.Glob(r.file("rep-*"))
		for _, d := range m {
			if st, err := os.Stat(filepath.Join(d, "summary.json")); err == nil && !st.IsDir() {
				dirs = append(dirs, filepath.Base(d))
			}
		}
		sort.Strings(dirs)
	}
	for _, d := range dirs {
		rr, err := load(r.file(d), 1)
		if err != nil {
			r.problem("repetition %s: %v", d, err)
			continue
		}
		rr.role = fmt.Sprintf("repetition %s of %d", d, len(dirs))
		r.Reps = append(r.Reps, rr)
	}
}

func (r *Results) readHists() {
	f, err := os.Open(r.file("latency.hlog"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.problem("latency.hlog: %v", err)
		}
		return
	}
	defer f.Close()
	r.Hists = map[string]*hdrhistogram.Histogram{}
	lr := hdrhistogram.NewHistogramLogReader(f)
	for {
		h, err := lr.NextIntervalHistogram()
		if err != nil {
			r.problem("latency.hlog: %v", err)
			return
		}
		if h == nil {
			return
		}
		if old, ok := r.Hists[h.Tag()]; ok {
			old.Merge(h)
			continue
		}
		r.Hists[h.Tag()] = h
	}
}

// IsSweep reports whether the directory holds a sweep.
func (r *Results) IsSweep() bool { return r.Sweep != nil }

// IsRepetitions reports whether the directory aggregates repetitions.
func (r *Results) IsRepetitions() bool {
	if r.Summary != nil && (r.Summary.Kind == "repetitions" || r.Summary.TPMCI != nil) {
		return true
	}
	return len(r.Reps) > 0
}

// Name is the run's name, or the directory's.
func (r *Results) Name() string {
	if r.Summary != nil && r.Summary.Name != "" {
		return r.Summary.Name
	}
	if r.Sweep != nil && r.Sweep.Name != "" {
		return r.Sweep.Name
	}
	for _, p := range r.Points {
		if p != nil && p.Summary != nil && p.Summary.Name != "" {
			return p.Summary.Name
		}
	}
	return filepath.Base(filepath.Clean(r.Dir))
}

// table is a CSV file addressed by column name; absent columns read as NaN.
type table struct {
	cols map[string]int
	rows [][]string
}

func readTable(rd io.Reader) (*table, error) {
	cr := csv.NewReader(rd)
	cr.FieldsPerRecord = -1
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errors.New("empty file (no header)")
	}
	t := &table{cols: map[string]int{}, rows: recs[1:]}
	for i, c := range recs[0] {
		t.cols[strings.TrimSpace(c)] = i
	}
	return t, nil
}

func (t *table) str(row []string, col string) string {
	i, ok := t.cols[col]
	if !ok || i >= len(row) {
		return ""
	}
	return strings.TrimSpace(row[i])
}

func (t *table) num(row []string, col string) float64 {
	s := t.str(row, col)
	if s == "" {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// readRows reads a CSV file of the directory with parse; a missing file
// gives nil, an unreadable one a Problem.
func readRows[T any](r *Results, name string, parse func(*table, []string) T) []T {
	f, err := os.Open(r.file(name))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.problem("%s: %v", name, err)
		}
		return nil
	}
	defer f.Close()
	t, err := readTable(f)
	if err != nil {
		r.problem("%s: %v", name, err)
		return nil
	}
	out := make([]T, 0, len(t.rows))
	for _, row := range t.rows {
		out = append(out, parse(t, row))
	}
	return out
}

func parseSeries(t *table, row []string) SeriesRow {
	return SeriesRow{
		T: t.num(row, "t_s"), Phase: t.str(row, "phase"),
		Commits: t.num(row, "commits"), Errors: t.num(row, "errors"),
		P50Ms: t.num(row, "latency_p50_ms"), P99Ms: t.num(row, "latency_p99_ms"), MaxMs: t.num(row, "latency_max_ms"),
	}
}

func parseLag(t *table, row []string) LagRow {
	return LagRow{
		T: t.num(row, "t_s"), Replica: t.str(row, "replica"), Observed: t.num(row, "observed"),
		P50Ms: t.num(row, "lag_p50_ms"), P99Ms: t.num(row, "lag_p99_ms"), MaxMs: t.num(row, "lag_max_ms"),
	}
}

func parseLink(t *table, row []string) LinkRow {
	return LinkRow{
		T: t.num(row, "time_s"), Direction: t.str(row, "direction"),
		DeliveredBytes: t.num(row, "delivered_bytes"), DeliveredPackets: t.num(row, "delivered_packets"),
		DroppedQueue: t.num(row, "dropped_queue_packets"), DroppedLoss: t.num(row, "dropped_loss_packets"),
		DroppedOther: t.num(row, "dropped_other_packets"),
		QueueBytes:   t.num(row, "queue_bytes"), RateBps: t.num(row, "rate_bps"),
	}
}

func parseRole(t *table, row []string) RoleRow {
	return RoleRow{
		T: t.num(row, "t_s"), Node: t.str(row, "node"), Role: t.str(row, "role"),
		CPUUserS: t.num(row, "cpu_user_s"), CPUSysS: t.num(row, "cpu_sys_s"), IOWait: t.num(row, "io_wait_s"),
		RSSBytes: t.num(row, "rss_bytes"),
	}
}

// parseReplication reads a row of replication.csv, as written now
// (backlog, backlog_unit) or by replab 0.1 (bytes_behind).
func parseReplication(t *table, row []string) ReplicationRow {
	r := ReplicationRow{
		T: t.num(row, "t_s"), Node: t.str(row, "node"), From: t.str(row, "from"), Kind: t.str(row, "kind"),
		State: t.str(row, "state"), Backlog: t.num(row, "backlog"), BacklogUnit: t.str(row, "backlog_unit"),
		ReplayLagMs: t.num(row, "replay_lag_ms"),
	}
	if _, old := t.cols["bytes_behind"]; old {
		r.Backlog, r.BacklogUnit = t.num(row, "bytes_behind"), "bytes"
	}
	return r
}
