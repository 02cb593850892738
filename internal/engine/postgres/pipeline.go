package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
	"replab/internal/pipeline"
	"replab/internal/spec"
	"replab/internal/units"
)

// The pipeline scheme (replication = "pipeline"): the GoldenGate study's
// architecture built from PostgreSQL's logical decoding and replab's own
// stages (internal/pipeline). Every replica is a cluster of its own, as
// for logical replication. The primary publishes every table (FOR ALL
// TABLES, so the workload's tables, replab_marker and the lag probe's
// replab_lag are all carried) to one slot, replab_pipe, which one extract
// in the primary's site reads into the local trail. Per replica, in the
// "normal" configuration, a pump in the primary's site ships the trail to a
// collector in the replica's site, and a replicat there applies the remote
// trail; in the "remote" configuration (pump = false) the replicat runs in
// the primary's site and applies the local trail across the link. Every
// stage is a process of its own (replab's binary, see pipeline.StageMain).

// pipelinePlan is the [scheme] options of the pipeline.
type pipelinePlan struct {
	pump         bool          // false: the "remote" configuration
	compress     int           // compression level, 0 = off (COMPRESS)
	codec        string        // "deflate" or "zstd"
	tls          bool          // TLS between pump and collector (ENCRYPT)
	compressMin  int           // COMPRESSTHRESHOLD
	flushBytes   int           // TCPFLUSHBYTES
	flushEvery   time.Duration // how long a partial block may wait
	socketBuffer int           // TCPBUFSIZE: pump SO_SNDBUF, collector SO_RCVBUF
	batch        bool          // BATCHSQL
	groupOps     int           // GROUPTRANSOPS
	replicats    int           // replicats per replica ("more replicats", @RANGE)
	split        string        // how they share the changes: "key" or "table"
	sink         string        // the replicas' engine ([scheme] target): "postgres" or "mariadb"
}

func readPipelinePlan(o *spec.Options) *pipelinePlan {
	pp := &pipelinePlan{pump: true}
	if b := o.Bool("pump"); b != nil {
		pp.pump = *b
	}
	pp.compress = int(o.Int("compress", 0, 0, 9))
	pp.codec = o.String("codec", pipeline.CodecDeflate, pipeline.CodecDeflate, pipeline.CodecZstd)
	if b := o.Bool("tls"); b != nil {
		pp.tls = *b
	}
	if o.Has("codec") && pp.compress == 0 {
		o.Errorf("codec", "codec says how the pump compresses; set compress = 1 to 9 (the level) too")
	}
	pp.compressMin = int(o.Size("compress_min", 512, 0, 64<<20))
	pp.flushBytes = int(o.Size("flush_bytes", 65519, 1, 64<<20))
	pp.flushEvery = o.Duration("flush_interval", 0, 0, time.Minute)
	pp.socketBuffer = int(o.Size("socket_buffer", 0, 0, 256<<20))
	if b := o.Bool("batch"); b != nil {
		pp.batch = *b
	}
	pp.groupOps = int(o.Int("group_ops", 1000, 1, 1_000_000)) // GoldenGate's GROUPTRANSOPS default
	pp.replicats = int(o.Int("replicats", 1, 1, 16))
	pp.split = o.String("split", "key", "key", "table")
	pp.sink = o.String("target", sinkPostgres, sinkPostgres, sinkMariaDB)
	if o.Has("split") && pp.replicats == 1 {
		o.Errorf("split", "split says how several replicats share a replica's changes; set replicats = 2 or more")
	}
	if !pp.pump {
		for _, k := range []string{"compress", "codec", "compress_min", "flush_bytes", "flush_interval", "socket_buffer", "tls"} {
			if o.Has(k) {
				o.Errorf(k, "%s is a pump option; with pump = false (the \"remote\" configuration) there is no pump", k)
			}
		}
	}
	return pp
}

// pipelineSlot is the primary's slot and publication.
const pipelineSlot = "replab_pipe"

// collectorPort is the port a replica's collector listens on in its site
// (GoldenGate's manager listens on 7809).
const collectorPort = 7809

// pipelineState is the running stages.
type pipelineState struct {
	mu     sync.Mutex
	bin    string // the binary stage processes run
	dir    string // the primary's pipeline directory (local trail)
	stages []*pipelineStage
}

// pipelineStage is one stage process.
type pipelineStage struct {
	node string // the node it serves: the primary (extract) or a replica
	site string
	cfg  pipeline.StageConfig
	proc *enginekit.Proc
	// held: a fault stopped, killed or paused it on purpose, so its exit
	// is not a failure.
	held bool
}

// upPipeline builds the primary and the replicas, the publication and
// slot, and starts the stages.
func (c *cluster) upPipeline(ctx context.Context) error {
	primary := c.byName[c.plan.primaries[0]]
	if err := c.createPrimary(ctx, primary); err != nil {
		return err
	}
	// The publication and slot before any workload table exists: FOR ALL
	// TABLES takes in tables created later, and the slot, made while no
	// transaction runs, is ready at once.
	if err := primary.exec(ctx, "", "CREATE PUBLICATION "+pipelineSlot+" FOR ALL TABLES"); err != nil {
		return err
	}
	if err := pipeline.CreateSlot(ctx, primary.conninfo(""), pipelineSlot, primary.site.DialContext); err != nil {
		return fmt.Errorf("node %s: %w", primary.Name, err)
	}
	if pp := c.plan.pipeline; pp.sink == sinkMariaDB {
		if err := c.startSinks(ctx); err != nil {
			return err
		}
	} else if err := enginekit.Each(c.replicas(), func(r *node) error { return c.createPrimary(ctx, r) }); err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("pipeline: find replab's binary to run the stages: %w", err)
	}
	dir, err := c.pipelineDir(primary)
	if err != nil {
		return err
	}
	ps := &pipelineState{bin: bin, dir: dir}
	c.pipeline = ps
	local := filepath.Join(dir, "local.trail")
	pp := c.plan.pipeline
	add := func(node, site string, cfg pipeline.StageConfig) {
		ps.stages = append(ps.stages, &pipelineStage{node: node, site: site, cfg: cfg})
	}
	add(primary.Name, primary.Site, pipeline.StageConfig{Kind: pipeline.KindExtract, Stats: filepath.Join(dir, "extract.json"),
		Extract: &pipeline.ExtractConfig{DSN: primary.conninfo("replab_extract"), Slot: pipelineSlot, Publications: []string{pipelineSlot}, Trail: local}})
	// replicats adds a replica's replicats (one per part) reading trail in
	// site, their counters in statsDir.
	replicats := func(r *node, site, trailPath, statsDir, prefix string) {
		for i := 0; i < pp.replicats; i++ {
			rc := &pipeline.ReplicatConfig{DSN: r.conninfo("replab_replicat"), Name: r.Name, Trail: trailPath, Batch: pp.batch, GroupOps: pp.groupOps}
			if c.isSink(r.Name) {
				rc.Engine, rc.DSN = pipeline.EngineMariaDB, c.sinks.DSN(r.Name)
			}
			stats := prefix + ".json"
			if pp.replicats > 1 {
				rc.Parts, rc.Part, rc.SplitBy = pp.replicats, i, pp.split
				rc.Name = fmt.Sprintf("%s#%d", r.Name, i+1)
				stats = fmt.Sprintf("%s-%d.json", prefix, i+1)
			}
			add(r.Name, site, pipeline.StageConfig{Kind: pipeline.KindReplicat, Stats: filepath.Join(statsDir, stats), Replicat: rc})
		}
	}
	for _, r := range c.replicas() {
		if !pp.pump {
			replicats(r, primary.Site, local, dir, "replicat-"+r.Name)
			continue
		}
		rdir, err := c.pipelineDir(r)
		if err != nil {
			return err
		}
		remote := filepath.Join(rdir, "remote.trail")
		listen := net.JoinHostPort(r.site.Address.String(), strconv.Itoa(collectorPort))
		var serverTLS, clientTLS *pipeline.TLSFiles
		if pp.tls {
			// A CA of its own per collector: the pump trusts that
			// collector's certificate (for its site's address) only.
			files, err := pipeline.MakeTLS(filepath.Join(rdir, "tls"), []string{r.site.Address.String()})
			if err != nil {
				return fmt.Errorf("pipeline: TLS for %s: %w", r.Name, err)
			}
			serverTLS, clientTLS = &files, &pipeline.TLSFiles{CA: files.CA}
		}
		add(r.Name, r.Site, pipeline.StageConfig{Kind: pipeline.KindCollector, Stats: filepath.Join(rdir, "collector.json"),
			Collector: &pipeline.CollectorConfig{Trail: remote, SocketBuffer: pp.socketBuffer, TLS: serverTLS}, Listen: listen})
		add(r.Name, primary.Site, pipeline.StageConfig{Kind: pipeline.KindPump, Stats: filepath.Join(dir, "pump-"+r.Name+".json"),
			Pump: &pipeline.PumpConfig{Name: r.Name, Trail: local, Addr: listen, Compress: pp.compress, Codec: pp.codec, CompressMin: pp.compressMin,
				FlushBytes: pp.flushBytes, FlushEvery: pp.flushEvery, SocketBuffer: pp.socketBuffer, TLS: clientTLS}})
		replicats(r, r.Site, remote, rdir, "replicat")
	}
	for _, s := range ps.stages {
		if err := c.startStage(s); err != nil {
			return err
		}
	}
	mode := "normal: extract and pumps in " + primary.Site + ", collector and replicat in each replica's site"
	if !pp.pump {
		mode = "remote: extract and replicats in " + primary.Site + ", applying across the links"
	}
	if pp.replicats > 1 {
		mode += fmt.Sprintf(", %d replicats per replica split by %s", pp.replicats, pp.split)
	}
	if c.sinks != nil {
		mode += ", replicas on MariaDB " + c.sinks.Version()
	}
	compress := "off"
	if pp.compress > 0 {
		compress = fmt.Sprintf("%s %d", pp.codec, pp.compress)
	}
	if pp.pump && pp.tls {
		mode += ", TLS between pumps and collectors"
	}
	c.logf("pipeline: %d stages (%s); batch %t, group_ops %d, compress %s, flush_bytes %s\n",
		len(ps.stages), mode, pp.batch, pp.groupOps, compress, units.Bytes(float64(pp.flushBytes)))
	return nil
}

// pipelineDir is a node's pipeline directory (trails and stage counters), on
// its storage.
func (c *cluster) pipelineDir(n *node) (string, error) {
	data, err := c.lab.NodeDataDir(n.Name)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(data, "pipeline-"+n.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("pipeline: %w", err)
	}
	return dir, nil
}

// startStage starts one stage process in its site; its stderr goes to the
// cluster's log.
func (c *cluster) startStage(s *pipelineStage) error {
	cmd, err := pipeline.Command(c.pipeline.bin, s.cfg)
	if err != nil {
		return err
	}
	cmd.Stderr = c.log
	p, err := enginekit.StartProc(c.lab.Site(s.site), cmd)
	if err != nil {
		return fmt.Errorf("pipeline: start the %s for %s in %s: %w", s.cfg.Kind, s.node, s.site, err)
	}
	c.pipeline.mu.Lock()
	s.proc = p
	c.pipeline.mu.Unlock()
	return nil
}

// stopPipeline stops every stage (SIGTERM: each finishes what it holds),
// killing a stage that has not exited within 15 s.
func (c *cluster) stopPipeline() {
	if c.pipeline == nil {
		return
	}
	c.pipeline.mu.Lock()
	stages := c.pipeline.stages
	c.pipeline.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range stages {
		if s.proc == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			s.proc.Stop(syscall.SIGTERM, 15*time.Second)
			if d := time.Since(start); d > 2*time.Second {
				c.logf("pipeline: the %s for %s took %.1f s to stop\n", s.cfg.Kind, s.node, d.Seconds())
			}
		}()
	}
	wg.Wait()
}

// pipelineProcesses are the stage processes for the monitors: a replicat and
// a collector receive or apply changes for their replica, and its pump
// ships them.
func (c *cluster) pipelineProcesses() []engine.Process {
	if c.pipeline == nil {
		return nil
	}
	c.pipeline.mu.Lock()
	defer c.pipeline.mu.Unlock()
	var out []engine.Process
	for _, s := range c.pipeline.stages {
		if pid := s.proc.PID(); pid != 0 {
			// A replica's own stages are on its path alone: one that
			// saturates a core is named by its verdict. The extract
			// serves every replica.
			apply := s.cfg.Kind != pipeline.KindExtract
			out = append(out, engine.Process{Node: s.node, Role: s.cfg.Kind, PID: pid, Apply: apply})
		}
	}
	return out
}

// pipelineReplicationState is, per replica, how far each stage has got: the
// trail bytes the extract wrote, the pump shipped and the collector
// holds, and the position the replicat applied, with the backlog in trail
// bytes not yet applied (the remote configuration's replicat reads the
// local trail, so both ends are in the same trail's positions).
func (c *cluster) pipelineReplicationState(ctx context.Context) ([]engine.ReplicaState, error) {
	if c.pipeline == nil {
		return nil, nil
	}
	c.pipeline.mu.Lock()
	stages := c.pipeline.stages
	c.pipeline.mu.Unlock()
	read := func(s *pipelineStage) pipeline.Stats {
		st, _ := pipeline.ReadStats(s.cfg.Stats) // a stage not yet started has none
		return st
	}
	var extracted pipeline.Stats
	byNode := map[string][]*pipelineStage{}
	for _, s := range stages {
		if s.cfg.Kind == pipeline.KindExtract {
			extracted = read(s)
			continue
		}
		byNode[s.node] = append(byNode[s.node], s)
	}
	primary := c.plan.primaries[0]
	var out []engine.ReplicaState
	for _, r := range c.replicas() {
		rs := engine.ReplicaState{Node: r.Name, From: primary, Kind: "pipeline", State: "applying", BacklogUnit: engine.UnitBytes, ReplayLagMs: -1}
		rs.Positions = append(rs.Positions, engine.Position{Name: "extract_trail_bytes", Value: strconv.FormatInt(extracted.Bytes, 10)})
		var applied int64
		nrep := 0
		for _, s := range byNode[r.Name] {
			st := read(s)
			switch s.cfg.Kind {
			case pipeline.KindPump:
				rs.Positions = append(rs.Positions, engine.Position{Name: "pump_acked_bytes", Value: strconv.FormatInt(st.Acked, 10)})
			case pipeline.KindCollector:
				rs.Positions = append(rs.Positions, engine.Position{Name: "collector_trail_bytes", Value: strconv.FormatInt(st.Bytes, 10)})
			case pipeline.KindReplicat:
				// Several replicats: the slowest says what is applied.
				if nrep == 0 || st.Bytes < applied {
					applied = st.Bytes
				}
				name := "replicat"
				if s.cfg.Replicat.Parts > 1 {
					name = fmt.Sprintf("replicat%d", s.cfg.Replicat.Part+1)
				}
				nrep++
				rs.Positions = append(rs.Positions, engine.Position{Name: name + "_applied_bytes", Value: strconv.FormatInt(st.Bytes, 10)},
					engine.Position{Name: name + "_lsn", Value: lsnText(st.Position)})
			}
			if s.proc.PID() == 0 {
				rs.State = s.cfg.Kind + " down"
			}
		}
		rs.Backlog = max(extracted.Bytes-applied, 0)
		out = append(out, rs)
	}
	return out, nil
}

// lsnText writes an LSN as PostgreSQL does.
func lsnText(lsn uint64) string { return fmt.Sprintf("%X/%X", lsn>>32, uint32(lsn)) }

// Gauges implements engine.Gauger: each stage's counters, for the pipeline
// scheme (none otherwise). They are the stage processes' own totals; the
// monitors count a restarted stage's increase from zero.
func (c *cluster) Gauges(ctx context.Context) ([]engine.Gauge, error) {
	if c.pipeline == nil {
		return nil, nil
	}
	c.pipeline.mu.Lock()
	stages := c.pipeline.stages
	c.pipeline.mu.Unlock()
	// Several replicats of one replica add up under one name.
	var out []engine.Gauge
	at := map[[2]string]int{}
	for _, s := range stages {
		st, err := pipeline.ReadStats(s.cfg.Stats)
		if err != nil {
			continue // not written yet
		}
		add := func(name string, v int64) {
			k := [2]string{s.node, s.cfg.Kind + "_" + name}
			if i, ok := at[k]; ok {
				out[i].Value += float64(v)
				return
			}
			at[k] = len(out)
			out = append(out, engine.Gauge{Node: s.node, Name: k[1], Value: float64(v), Counter: true})
		}
		add("records", st.Records)
		add("transactions", st.Transactions)
		switch s.cfg.Kind {
		case pipeline.KindExtract, pipeline.KindCollector:
			add("fsyncs", st.Syncs)
		case pipeline.KindPump:
			add("trail_bytes", st.RawBytes)
			add("sent_bytes", st.SentBytes)
			add("blocks", st.Blocks)
			add("compress_ms", st.CompressNs/1e6)
		case pipeline.KindReplicat:
			add("round_trips", st.RoundTrips)
			add("statements", st.Statements)
			add("commits", st.Syncs)
		}
	}
	return out, nil
}

// pipelineStageError is a stage process that exited on its own.
type pipelineStageError struct {
	kind, node, status, why string
}

func (e *pipelineStageError) Error() string {
	msg := fmt.Sprintf("pipeline: the %s for %s exited (%s)", e.kind, e.node, e.status)
	if e.why != "" {
		msg += ": " + e.why
	}
	return msg
}

// pipelineDown is the first stage that exited on its own, nil while all run
// (or without the pipeline scheme). Stages stopped on purpose (Close, or
// a fault through DoStage) do not count.
func (c *cluster) pipelineDown() error {
	if c.pipeline == nil {
		return nil
	}
	c.pipeline.mu.Lock()
	defer c.pipeline.mu.Unlock()
	for _, s := range c.pipeline.stages {
		if s.proc == nil || s.held {
			continue
		}
		if st := s.proc.ExitStatus(); st != "" {
			e := &pipelineStageError{kind: s.cfg.Kind, node: s.node, status: st}
			if stats, err := pipeline.ReadStats(s.cfg.Stats); err == nil {
				e.why = stats.Error
			}
			return e
		}
	}
	return nil
}

// Stages implements engine.StageControl: the stages that serve node.
func (c *cluster) Stages(node string) []string {
	if c.plan.manager != nil {
		if c.byName[node] == nil {
			return nil
		}
		return c.plan.managerStages()
	}
	if c.pipeline == nil {
		return nil
	}
	return c.plan.stages(node)
}

// DoStage implements engine.StageControl: a fault on every process of a
// node's stage (a replica's replicats together). A killed or stopped
// stage resumes where it left off when started again: the extract from
// its trail's end, a pump from the collector's, a replicat from its
// checkpoint at the replica.
func (c *cluster) DoStage(ctx context.Context, node, stage, do string) error {
	if c.plan.manager != nil {
		n, err := c.controlled(node)
		if err != nil {
			return err
		}
		return c.managedStage(ctx, n, stage, do)
	}
	if c.pipeline == nil {
		return fmt.Errorf("node %s has no replication stages", node)
	}
	c.pipeline.mu.Lock()
	var of []*pipelineStage
	for _, s := range c.pipeline.stages {
		if s.node == node && s.cfg.Kind == stage {
			of = append(of, s)
		}
	}
	c.pipeline.mu.Unlock()
	if len(of) == 0 {
		return fmt.Errorf("node %s has no %s", node, stage)
	}
	if do == "restart" {
		if err := c.DoStage(ctx, node, stage, "stop"); err != nil {
			return err
		}
		do = "start"
	}
	for _, s := range of {
		if err := c.doStage(ctx, s, do); err != nil {
			return err
		}
	}
	c.logf("pipeline: the %s for %s: %s\n", stage, node, do)
	return nil
}

func (c *cluster) doStage(ctx context.Context, s *pipelineStage, do string) error {
	c.pipeline.mu.Lock()
	p := s.proc
	c.pipeline.mu.Unlock()
	running := p.PID() != 0
	what := fmt.Sprintf("the %s for %s", s.cfg.Kind, s.node)
	hold := func(h bool) {
		c.pipeline.mu.Lock()
		s.held = h
		c.pipeline.mu.Unlock()
	}
	switch do {
	case "kill", "stop":
		if !running {
			return fmt.Errorf("%s is not running", what)
		}
		hold(true)
		if do == "stop" {
			p.Stop(syscall.SIGTERM, 15*time.Second) // it finishes what it holds
			return nil
		}
		if err := p.Signal(ctx, syscall.SIGKILL); err != nil {
			return fmt.Errorf("%s: kill: %w", what, err)
		}
	case "start":
		if running {
			return fmt.Errorf("%s is running", what)
		}
		if err := c.startStage(s); err != nil {
			return err
		}
		hold(false)
	case "pause", "resume":
		if !running {
			return fmt.Errorf("%s is not running", what)
		}
		sig := syscall.SIGSTOP
		if do == "resume" {
			sig = syscall.SIGCONT
		}
		hold(do == "pause")
		if err := syscall.Kill(p.PID(), sig); err != nil {
			return fmt.Errorf("%s: %s: %w", what, do, err)
		}
	default:
		return fmt.Errorf("%s: cannot %s a stage", what, do)
	}
	return nil
}

// pipelineWaitApplied waits, after a marker arrived, until every replicat has
// applied the trail as far as it held the marker. With several
// replicats per replica the marker passes through one of them only; the
// others may still be behind.
func (c *cluster) pipelineWaitApplied(ctx context.Context) error {
	if c.pipeline == nil || c.plan.pipeline.replicats < 2 {
		return nil
	}
	c.pipeline.mu.Lock()
	stages := c.pipeline.stages
	c.pipeline.mu.Unlock()
	var extract *pipelineStage
	for _, s := range stages {
		if s.cfg.Kind == pipeline.KindExtract {
			extract = s
		}
	}
	// The trail holds the marker by now (it was applied from it), and
	// the extract's counters do once they were written again.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * pipeline.StatsEvery):
	}
	end, err := pipeline.ReadStats(extract.cfg.Stats)
	if err != nil {
		return fmt.Errorf("pipeline: the extract's counters: %w", err)
	}
	var stageErr *pipelineStageError
	return enginekit.Each(stages, func(s *pipelineStage) error {
		if s.cfg.Kind != pipeline.KindReplicat {
			return nil
		}
		_, err := enginekit.Poll{Stall: c.flowTimeout(), Permanent: func(err error) bool { return errors.As(err, &stageErr) }}.Until(ctx, func(ctx context.Context) (bool, string, error) {
			st, err := pipeline.ReadStats(s.cfg.Stats)
			if err != nil || st.Bytes < end.Bytes {
				if down := c.pipelineDown(); down != nil {
					return false, "", down
				}
			}
			return err == nil && st.Bytes >= end.Bytes, fmt.Sprintf("applied to trail byte %d of %d", st.Bytes, end.Bytes), nil
		})
		if err != nil {
			return fmt.Errorf("node %s: replicat %s: %w", s.node, s.cfg.Replicat.Name, err)
		}
		return nil
	})
}
