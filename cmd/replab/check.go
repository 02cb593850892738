package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"replab/internal/check"
	"replab/internal/history"
)

func cmdCheck(_ context.Context, args []string, out io.Writer) error {
	flags := newFlags("check", "replab check RESULTS_DIR [--jepsen-edn FILE] [--witnesses 3]",
		`Checks the history a run recorded (RESULTS_DIR/history.jsonl) for isolation
anomalies, Elle-style: version orders from list-append reads (and what can be
inferred for registers), the dependency graph with process and real-time
order, its cycles (G0, G1c, G-single, G-nonadjacent, G2-item, and their
-process and -realtime variants), aborted and intermediate reads, lost and
dirty updates, and the session guarantees. Prints the verdict (the strongest
consistency model satisfied, the weakest violated, each anomaly with a
witness) and writes RESULTS_DIR/check.json. A history cut short by a crash is
checked up to its last complete operation. Exit status 3 when an anomaly was
found. See docs/consistency.md.`)
	edn := flags.String("jepsen-edn", "", "also write the history in Jepsen's EDN form (for elle-cli) to this file")
	witnesses := flags.Int("witnesses", 3, "witnesses printed per anomaly class (check.json keeps up to 10)")
	maxOps := flags.Int("max-ops", check.DefaultMaxOps, "check at most this many operations (later ones only name the writers of values)")
	maxTime := flags.Duration("max-time", check.DefaultMaxDuration, "stop the cycle search after this long")
	pos, err := parse(flags, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("check: give exactly one results directory (e.g. results/20260101-120000-quickstart)")
	}
	dir := pos[0]
	path := filepath.Join(dir, history.FileName)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if st, derr := os.Stat(dir); derr != nil || !st.IsDir() {
				return fmt.Errorf("check: %s is not a results directory", dir)
			}
			return fmt.Errorf("check: %s has no %s: that run did not record its history. Run a list-append or rw-register workload with history recording on ([run] history = true in the spec), then check its results directory", dir, history.FileName)
		}
		return fmt.Errorf("check: %w", err)
	}
	t0 := time.Now()
	res, err := check.File(path, check.Options{MaxOps: *maxOps, MaxDuration: *maxTime})
	if err != nil {
		return err
	}
	if res.HistoryCutShort != nil {
		fmt.Fprintf(os.Stderr, "replab check: warning: the %s; checking the %d operations before it\n", res.HistoryCutShort.Message, res.HistoryCutShort.AfterOps)
	}
	if err := res.WriteText(out, max(*witnesses, 0)); err != nil {
		return err
	}
	jsonPath := filepath.Join(dir, "check.json")
	if err := res.WriteJSONFile(jsonPath); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	fmt.Fprintf(out, "\nwrote %s (checked in %.1f s)\n", jsonPath, time.Since(t0).Seconds())
	if *edn != "" {
		if err := writeEDN(path, *edn); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", *edn)
	}
	if !res.Valid() {
		return exitError{3}
	}
	return nil
}

// writeEDN converts the history at path to Jepsen's EDN form.
func writeEDN(path, out string) error {
	ops, _, err := history.Read(path)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if err := history.ToJepsenEDN(f, ops); err != nil {
		f.Close()
		return fmt.Errorf("check: %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}
