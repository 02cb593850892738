// Package pageread is the object database study's workload (seed 004): a
// client reads a page server's files page by page across a link. Each
// driver user is one request in flight: with users = 1 the client waits
// for every page before asking for the next (the study's handshake); with
// K users sharing one connection, K requests are in flight on it (the fix
// the study proposed); with a connection per user, K connections each
// carry one. Every page is timed from request to last byte, checked
// against the data set's content, and followed by a sample of the
// connection's TCP_INFO (congestion window, RTT, retransmissions), so
// that slow pages can be explained (package pagestats).
package pageread

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"replab/internal/engine"
	"replab/internal/pagedata"
	"replab/internal/pagestats"
	"replab/internal/tcpdiag"
	"replab/internal/workload"
	"replab/internal/xrd"
)

// Factory registers the workload as kind "page-read".
var Factory = workload.Factory{Kind: "page-read", New: New}

// Option defaults and bounds.
const (
	DefaultPageSize = 8 << 10 // the study's 8 KiB pages
	MinPageSize     = 512
	MaxPageSize     = 16 << 20
)

// Orders and connection modes.
const (
	Sequential = "sequential"
	Random     = "random"
	Shared     = "shared"   // every user's requests on one connection
	PerUser    = "per-user" // a connection per user
)

// Workload is the page-read workload with its options resolved.
type Workload struct {
	pageSize int64
	order    string
	conns    string
	factor   float64
	verify   bool
	node     string

	// Per measurement, from Connect to Close.
	state atomic.Pointer[session]
}

// session is one measurement's connections and records.
type session struct {
	conns []*xrd.Conn
	files [][]*xrd.File // per connection, per file
	sizes []int64       // per file
	seed  []int64       // per file, its content's seed
	index []int         // per file, its content's file number
	pages []int64       // per file, how many pages; cumulative in ends
	ends  []int64
	total int64

	next  atomic.Int64 // sequential order: the next page
	users []userState

	// The server's side of each connection, watched through sock_diag in
	// its site; nil when sites are not namespaces.
	diag   *tcpdiag.Prober
	server netip.AddrPort
	client []netip.AddrPort // per connection, its local end
}

// userState is what one user (one goroutine) records: no locks.
type userState struct {
	buf   []byte
	pages []page
}

// page is one read as recorded: wall-clock (monotonic) start and end.
type page struct {
	index      int64
	conn       int
	start, end time.Time
	bytes      int
	tcp        xrd.TCPInfo
}

// New reads the options.
func New(o *workload.Options) (workload.Workload, error) {
	w := &Workload{
		pageSize: o.Size("page_size", DefaultPageSize, MinPageSize, MaxPageSize),
		order:    o.String("order", Sequential, Sequential, Random),
		conns:    o.String("connections", Shared, Shared, PerUser),
		factor:   o.Float("slow_factor", pagestats.DefaultFactor, 1.01, 100),
		node:     o.String("node", ""),
		verify:   true,
	}
	if b := o.Bool("verify"); b != nil {
		w.verify = *b
	}
	if o.Dialect != "" {
		return nil, fmt.Errorf("workload page-read reads files from a page server (engine xrootd); this engine serves SQL (%s)", o.Dialect)
	}
	if o.Spec != nil && w.node != "" && o.Spec.Node(w.node) == nil {
		o.Errorf("node", "no node %q in this spec", w.node)
	}
	return w, nil
}

// Name implements workload.Workload.
func (w *Workload) Name() string { return "page-read" }

// Schema implements workload.Workload: a page server has no tables.
func (w *Workload) Schema() engine.Schema { return engine.Schema{} }

// TotalRows implements workload.Workload: the engine writes the data set.
func (w *Workload) TotalRows() int64 { return 0 }

// Load implements workload.Workload.
func (w *Workload) Load(ctx context.Context, l workload.Loader, progress func(int64)) error {
	return nil
}

// Transactions implements workload.Workload: one type, a page.
func (w *Workload) Transactions() []workload.TxType {
	return []workload.TxType{{Name: "page", Weight: 1, ReadOnly: true, Op: w.read}}
}

var (
	_ workload.Connector    = (*Workload)(nil)
	_ workload.PageReporter = (*Workload)(nil)
)

// Connect implements workload.Connector: it opens the connections the
// mode asks for, from the client's site, and every file on each.
func (w *Workload) Connect(ctx context.Context, env workload.ConnectEnv) (err error) {
	ps, ok := env.Cluster.(engine.PageServer)
	if !ok {
		return errors.New("workload page-read needs a page server (engine xrootd)")
	}
	var files []engine.ServedFile
	for _, f := range ps.Files() {
		if w.node == "" {
			w.node = f.Node
		}
		if f.Node == w.node {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("node %s serves no files", w.node)
	}
	var srv engine.Node
	for _, n := range env.Nodes {
		if n.Name == w.node {
			srv = n
		}
	}
	if srv.Name == "" {
		return fmt.Errorf("no node %s", w.node)
	}
	addr := srv.Addr.String()
	s := &session{users: make([]userState, env.Users), server: srv.Addr}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if env.SiteDo != nil {
		s.diag, err = tcpdiag.Open(func(f func() error) error { return env.SiteDo(srv.Site, f) })
		if err != nil {
			return fmt.Errorf("watch the server's sockets in site %s: %w", srv.Site, err)
		}
	}
	for _, f := range files {
		n := (f.Size + w.pageSize - 1) / w.pageSize
		s.sizes, s.seed, s.index, s.pages = append(s.sizes, f.Size), append(s.seed, f.Seed), append(s.index, f.Index), append(s.pages, n)
		s.total += n
		s.ends = append(s.ends, s.total)
	}
	nconn := 1
	if w.conns == PerUser {
		nconn = env.Users
	}
	for i := range nconn {
		c, err := xrd.Dial(ctx, env.Dial, addr, "replab")
		if err != nil {
			return fmt.Errorf("connection %d to %s: %w", i, w.node, err)
		}
		s.conns = append(s.conns, c)
		local, err := netip.ParseAddrPort(c.LocalAddr().String())
		if err != nil {
			return fmt.Errorf("connection %d: its local address: %w", i, err)
		}
		s.client = append(s.client, local)
		var fs []*xrd.File
		for _, f := range files {
			h, err := c.Open(ctx, f.Path)
			if err != nil {
				return fmt.Errorf("open %s at %s: %w", f.Path, w.node, err)
			}
			fs = append(fs, h)
		}
		s.files = append(s.files, fs)
	}
	for i := range s.users {
		s.users[i].buf = make([]byte, w.pageSize)
	}
	w.state.Store(s)
	return nil
}

// Close implements workload.Connector.
func (w *Workload) Close() error {
	if s := w.state.Load(); s != nil {
		return s.close()
	}
	return nil
}

func (s *session) close() error {
	var errs []error
	for _, c := range s.conns {
		errs = append(errs, c.Close())
	}
	if s.diag != nil {
		errs = append(errs, s.diag.Close())
	}
	return errors.Join(errs...)
}

// read is the transaction: one page, on the user's connection.
func (w *Workload) read(ctx context.Context, call workload.OpCall, r *rand.Rand) (int64, error) {
	user := call.User
	s := w.state.Load()
	if s == nil {
		return 0, errors.New("page-read: not connected")
	}
	var i int64
	if w.order == Random {
		i = r.Int64N(s.total)
	} else {
		i = (s.next.Add(1) - 1) % s.total
	}
	f, _ := slices.BinarySearch(s.ends, i+1)
	first := int64(0)
	if f > 0 {
		first = s.ends[f-1]
	}
	off := (i - first) * w.pageSize
	n := min(w.pageSize, s.sizes[f]-off)
	ci := 0
	if len(s.conns) > 1 {
		ci = user
	}
	u := &s.users[user]
	buf := u.buf[:n]
	start := time.Now()
	got, err := s.files[ci][f].ReadAt(ctx, buf, off)
	end := time.Now()
	if err != nil {
		return 0, fmt.Errorf("page %d: %w", i, err)
	}
	if int64(got) != n {
		return 0, fmt.Errorf("page %d: %d bytes of %d", i, got, n)
	}
	if w.verify {
		if err := pagedata.Check(s.seed[f], s.index[f], off, buf); err != nil {
			return 0, fmt.Errorf("page %d: wrong content: %w", i, err)
		}
	}
	u.pages = append(u.pages, page{index: i, conn: ci, start: start, end: end, bytes: got, tcp: s.tcpInfo(ci)})
	return 0, nil
}

// tcpInfo is the TCP state of connection ci after a page: the server's
// side (the pages' sender, whose window limits them), or, where the
// server's sockets cannot be watched, the client's own. Zero when neither
// can say: the page still counts.
func (s *session) tcpInfo(ci int) xrd.TCPInfo {
	if s.diag != nil {
		if ti, err := s.diag.Info(s.server, s.client[ci]); err == nil {
			return xrd.FromUnix(&ti)
		}
		return xrd.TCPInfo{}
	}
	ti, _ := s.conns[ci].TCPInfo()
	return ti
}

// PageReport implements workload.PageReporter: pages.csv in dir, every
// page of the measurement in completion order, and the figures of the
// measure phase [from, to).
func (w *Workload) PageReport(dir string, from, to time.Time) (*pagestats.Summary, error) {
	s := w.state.Load()
	if s == nil {
		return nil, errors.New("page-read: nothing was read")
	}
	var all []page
	var users []int
	for ui := range s.users {
		for _, p := range s.users[ui].pages {
			all = append(all, p)
			users = append(users, ui)
		}
	}
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return all[a].end.Compare(all[b].end) })
	recs := make([]pagestats.Page, len(all))
	var measured, bytes int64
	for k, i := range order {
		p := all[i]
		m := !p.start.Before(from) && p.start.Before(to)
		if m {
			measured++
			bytes += int64(p.bytes)
		}
		recs[k] = pagestats.Page{Seq: int64(k), Index: p.index, User: users[i], Conn: p.conn,
			StartS: p.start.Sub(from).Seconds(), TimeMs: float64(p.end.Sub(p.start).Nanoseconds()) / 1e6, Bytes: p.bytes,
			Measured: m, CwndSegments: p.tcp.CwndSegments, SsthreshSegments: p.tcp.SsthreshSegments,
			RTTMs: float64(p.tcp.RTTMicros) / 1e3, Retransmits: p.tcp.Retransmits, CAState: p.tcp.CAState}
	}
	slow := make([]bool, len(recs))
	sum := &pagestats.Summary{
		PageSizeBytes: w.pageSize, Order: w.order, Connections: len(s.conns), Users: len(s.users),
		Pages: measured, Slow: pagestats.Detect(recs, w.factor, slow),
	}
	if secs := to.Sub(from).Seconds(); secs > 0 {
		sum.PagesPerS = float64(measured) / secs
		sum.ReadBytesPerS = float64(bytes) / secs
	}
	f, err := os.Create(filepath.Join(dir, "pages.csv"))
	if err != nil {
		return sum, err
	}
	err = pagestats.WriteCSV(f, recs, slow)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return sum, err
}
