package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"replab/internal/iotest"
	"replab/internal/lab"
	"replab/internal/report"
	"replab/internal/spec"
	"replab/internal/units"
)

func cmdIotest(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("iotest", "replab iotest FILE [--quick] [--node NAME] [--bs SIZES] [-o DIR]",
		`Measures each node's storage as its database server would see it, with fio:
brings the lab of FILE up without starting any server and, node after node,
runs fio inside the node's site, as the servers' OS user, in the directory
where the node's files live. Jobs, one at a time, one I/O in flight, O_DIRECT
where the file system allows it:
  random read and random write IOPS at 4k and 16k (--bs: other sizes),
  sequential read and write MB/s (1 MiB blocks, MB = 10^6 bytes),
  synchronous 8k writes (file opened O_SYNC, as a commit's log flush):
  latency p50 and p99 in ms from fio's completion-latency percentiles.
Prints a table and writes iotest.json, iotest.txt, environment.json and the
spec to DIR (default results/<timestamp>-<lab name>-iotest). The lab is torn
down at the end, on error and on Ctrl-C. See docs/iotest.md.`)
	quick := fs.Bool("quick", false, "1 s per job and a 16 MiB file (default 3 s and 64 MiB)")
	var nodes stringList
	fs.Var(&nodes, "node", "measure only this node (repeat for several)")
	dir := fs.String("o", "", "results directory (default results/<timestamp>-<lab name>-iotest)")
	runtime := fs.Duration("runtime", 0, "time per fio job (overrides --quick's and the default 3s)")
	sizeMiB := fs.Int64("size-mib", 0, "size of fio's file in MiB (overrides --quick's 16 and the default 64)")
	bs := fs.String("bs", "", "random read and write block sizes, comma-separated, in KiB with k (e.g. 2k,4k,8k,16k,32k: the storage study's Table 3; default 4k,16k)")
	state := fs.String("state", lab.DefaultStateRoot, "directory for lab state and control sockets")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("iotest: give exactly one spec file (e.g. examples/pg-quorum.toml)")
	}
	blocks, err := parseBlockSizes(*bs)
	if err != nil {
		return fmt.Errorf("iotest: --bs: %w", err)
	}
	s, _, err := loadChecked(pos[0])
	if err != nil {
		return err
	}
	if len(s.Nodes) == 0 {
		return fmt.Errorf("iotest: %s has no [node.NAME] tables: nothing to measure", pos[0])
	}
	for _, n := range nodes {
		if !slices.ContainsFunc(s.Nodes, func(sn spec.Node) bool { return sn.Name == n }) {
			var names []string
			for _, sn := range s.Nodes {
				names = append(names, sn.Name)
			}
			return fmt.Errorf("iotest: no node %s in %s (nodes: %s)", n, pos[0], strings.Join(names, ", "))
		}
	}
	opt := iotest.Options{Quick: *quick, Runtime: *runtime, FileSizeBytes: *sizeMiB << 20, BlockSizes: blocks}
	if err := lab.Preflight(); err != nil {
		return err
	}
	rd, err := report.NewDir(*dir, s.Lab.Name+"-iotest")
	if err != nil {
		return err
	}
	if s.File != "" {
		_ = rd.CopyFile(s.File, "spec.toml")
	}
	rt, size := iotest.Settings(opt)
	rep := iotest.Report{Lab: s.Lab.Name, Quick: *quick, RuntimePerJobS: rt.Seconds(), FileSizeBytes: size,
		Nodes: []iotest.Row{}, Environment: report.CaptureEnvironment(version, "")}

	fmt.Fprintf(out, "lab %s: building %d sites and %d links (no servers)\n", s.Lab.Name, len(s.Sites), len(s.Links))
	start := time.Now()
	err = func() (err error) {
		l, err := lab.Up(ctx, s, lab.Options{StateRoot: *state, Log: out})
		if err != nil {
			return err
		}
		defer func() {
			fmt.Fprintf(out, "lab %s: tearing down\n", s.Lab.Name)
			if cerr := l.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("teardown: %w", cerr))
			} else {
				fmt.Fprintf(out, "lab %s: removed\n", s.Lab.Name)
			}
		}()
		rows, err := iotest.LabNodes(ctx, l, nodes, opt, out)
		rep.Nodes = append(rep.Nodes, rows...)
		return err
	}()
	rep.Complete = err == nil
	if err != nil {
		rep.Error = err.Error()
	}
	var table strings.Builder
	iotest.WriteTable(&table, rep.Nodes)
	werr := errors.Join(rd.WriteJSON("iotest.json", rep), rd.WriteJSON("environment.json", rep.Environment),
		os.WriteFile(rd.File("iotest.txt"), []byte(table.String()), 0o644))
	if len(rep.Nodes) > 0 {
		fmt.Fprintf(out, "\n%s\n", table.String())
	}
	fmt.Fprintf(out, "iotest: %d node(s) in %.0f s\nresults: %s\n", len(rep.Nodes), time.Since(start).Seconds(), rd.Path)
	return errors.Join(err, werr)
}

// parseBlockSizes reads --bs: "2k,4k,32k" (KiB, or bytes without the k),
// each a multiple of 512 bytes (O_DIRECT's least alignment) from 512 bytes
// to 1 MiB, none twice. "" is nil: the default sizes.
func parseBlockSizes(v string) ([]int, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		mult := 1
		if n, ok := strings.CutSuffix(f, "k"); ok {
			f, mult = n, 1024
		}
		n, err := strconv.Atoi(f)
		b := n * mult
		switch {
		case err != nil || n <= 0:
			return nil, fmt.Errorf("%q is not a size: write KiB with k, e.g. 4k", f)
		case b%512 != 0 || b > 1<<20:
			return nil, fmt.Errorf("%s: a block size must be a multiple of 512 bytes up to 1024k (O_DIRECT's alignment)", units.Bytes(float64(b)))
		case slices.Contains(out, b):
			return nil, fmt.Errorf("%s given twice", units.Bytes(float64(b)))
		}
		out = append(out, b)
	}
	return out, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}
