package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// A stage runs as a process of its own in its site, so that the monitors
// see its CPU by role and faults can kill it. The process is replab's own
// binary (or a test binary) started with StageEnv set to the stage's
// configuration as JSON; main (or TestMain) hands it to StageMain before
// anything else.

// StageEnv carries a stage process's configuration.
const StageEnv = "REPLAB_PIPELINE_STAGE"

// Stage kinds, also the monitors' role names.
const (
	KindExtract   = "extract"
	KindPump      = "pump"
	KindCollector = "collector"
	KindReplicat  = "replicat"
)

// StageConfig is one stage process's whole configuration.
type StageConfig struct {
	Kind string `json:"kind"`
	// Stats is the file the process keeps its counters in (JSON,
	// replaced atomically every StatsEvery and at exit).
	Stats     string           `json:"stats"`
	Extract   *ExtractConfig   `json:"extract,omitempty"`
	Pump      *PumpConfig      `json:"pump,omitempty"`
	Collector *CollectorConfig `json:"collector,omitempty"`
	// Listen is the collector's address (host:port in its site).
	Listen   string          `json:"listen,omitempty"`
	Replicat *ReplicatConfig `json:"replicat,omitempty"`
}

// StatsEvery is how often a stage process writes its counters.
const StatsEvery = 100 * time.Millisecond

// Stats is a stage's counters as its process writes them.
type Stats struct {
	Kind         string `json:"kind"`
	PID          int    `json:"pid"`
	Records      int64  `json:"records"`
	Transactions int64  `json:"transactions"`
	Bytes        int64  `json:"bytes"`
	Syncs        int64  `json:"syncs"`
	Position     uint64 `json:"position"`
	LastCommitNs int64  `json:"last_commit_ns"`
	// Pump only.
	SentBytes  int64 `json:"sent_bytes,omitempty"`
	RawBytes   int64 `json:"raw_bytes,omitempty"`
	Blocks     int64 `json:"blocks,omitempty"`
	Acked      int64 `json:"acked,omitempty"`
	CompressNs int64 `json:"compress_ns,omitempty"`
	// Replicat only.
	RoundTrips int64 `json:"round_trips,omitempty"`
	Statements int64 `json:"statements,omitempty"`
	// Restarts counts how often the stage began again after its peer went
	// away (a pump whose collector restarted).
	Restarts int64 `json:"restarts,omitempty"`
	// Error is why the stage ended, if it failed.
	Error string `json:"error,omitempty"`
}

// ReadStats reads a stage's counters.
func ReadStats(path string) (Stats, error) {
	var s Stats
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("stage stats %s: %w", path, err)
	}
	return s, nil
}

// Command builds the command that runs cfg as a process of bin (replab's
// binary, or the test binary whose TestMain calls StageMain).
func Command(bin string, cfg StageConfig) (*exec.Cmd, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "pipeline-stage", cfg.Kind)
	cmd.Env = append(os.Environ(), StageEnv+"="+string(b))
	return cmd, nil
}

// IsStage says whether this process was started as a stage.
func IsStage() bool { return os.Getenv(StageEnv) != "" }

// StageMain runs the stage this process was started as until SIGTERM or
// SIGINT, and returns the exit status: 0 after a stop, 1 after a failure
// (the error on stderr and in the stats file).
func StageMain() int {
	var cfg StageConfig
	if err := json.Unmarshal([]byte(os.Getenv(StageEnv)), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "pipeline stage: bad %s: %v\n", StageEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := RunStage(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "pipeline %s: %v\n", cfg.Kind, err)
		return 1
	}
	return 0
}

// RunStage runs one stage in this process, keeping its counters in
// cfg.Stats, until ctx ends.
func RunStage(ctx context.Context, cfg StageConfig) error {
	var c PumpCounters // the widest; other stages use its Counters
	var rc ReplicatCounters
	var restarts int64
	snapshot := func(err error) Stats {
		s := Stats{Kind: cfg.Kind, PID: os.Getpid(), Restarts: restarts}
		base := &c.Counters
		if cfg.Kind == KindReplicat {
			base = &rc.Counters
			s.RoundTrips, s.Statements = rc.RoundTrips.Load(), rc.Statements.Load()
		}
		s.Records, s.Transactions, s.Bytes = base.Records.Load(), base.Transactions.Load(), base.Bytes.Load()
		s.Syncs, s.Position, s.LastCommitNs = base.Syncs.Load(), base.Position.Load(), base.LastCommitNs.Load()
		if cfg.Kind == KindPump {
			s.SentBytes, s.RawBytes, s.Blocks = c.SentBytes.Load(), c.RawBytes.Load(), c.Blocks.Load()
			s.Acked, s.CompressNs = c.Acked.Load(), c.CPUNs.Load()
		}
		if err != nil {
			s.Error = err.Error()
		}
		return s
	}
	done := make(chan struct{})
	defer close(done)
	if cfg.Stats != "" {
		go func() {
			t := time.NewTicker(StatsEvery)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					_ = writeStats(cfg.Stats, snapshot(nil))
				}
			}
		}()
	}
	var err error
	switch cfg.Kind {
	case KindExtract:
		if cfg.Extract == nil {
			return errors.New("no extract configuration")
		}
		err = Extract(ctx, *cfg.Extract, &c.Counters)
	case KindPump:
		if cfg.Pump == nil {
			return errors.New("no pump configuration")
		}
		// A pump outlives its collector: when the connection fails it
		// connects again (after 200 ms) and resumes where the remote
		// trail ends.
		start := time.Now()
		for {
			err = Pump(ctx, *cfg.Pump, &c)
			if ctx.Err() != nil {
				err = nil
				break
			}
			restarts++
			// The collector starts beside the pump: a refusal in the first
			// seconds is it not listening yet, not worth a line.
			if time.Since(start) > 3*time.Second {
				fmt.Fprintf(os.Stderr, "pipeline pump: %v; connecting again\n", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	case KindCollector:
		if cfg.Collector == nil {
			return errors.New("no collector configuration")
		}
		var l net.Listener
		l, err = net.Listen("tcp", cfg.Listen)
		if err != nil {
			err = fmt.Errorf("collector: listen on %s: %w", cfg.Listen, err)
			break
		}
		err = Collect(ctx, l, *cfg.Collector, &c.Counters)
	case KindReplicat:
		if cfg.Replicat == nil {
			return errors.New("no replicat configuration")
		}
		err = Replicat(ctx, *cfg.Replicat, &rc)
	default:
		err = fmt.Errorf("unknown stage kind %q", cfg.Kind)
	}
	if cfg.Stats != "" {
		if werr := writeStats(cfg.Stats, snapshot(err)); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// writeStats replaces path with s, atomically.
func writeStats(path string, s Stats) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".stats-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
