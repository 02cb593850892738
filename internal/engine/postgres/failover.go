package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"replab/internal/engine"
	"replab/internal/enginekit"
)

// Failover (engine.Promoter): a standby of a physical scheme is promoted
// to primary, as an operator (or a failover manager) would after losing
// the primary, and the other standbys of the old primary are re-pointed to
// it, as repmgr's "standby follow" would. The old primary is then out of
// the cluster: starting it again would make a second primary with commits
// the new one never saw, so Start refuses it (rejoining it with pg_rewind
// is not built).

var _ engine.Promoter = (*cluster)(nil)

// errDiverged: a standby replayed WAL of the old primary beyond the point
// where the new primary's timeline begins; it cannot follow it.
var errDiverged = errors.New("cannot follow")

// Promote implements engine.Promoter. Before pg_promote, while nothing has
// changed yet, the standby to promote gets a replication slot for each
// other standby of the old primary and, under the sync scheme, its
// synchronous_standby_names (see syncNamesAfter), so that not one commit
// at the new primary is acknowledged without its synchronous standbys.
// After it, the others' primary_conninfo names the new primary (reloaded,
// no restart: the WAL receiver reconnects and follows the new timeline,
// recovery_target_timeline being 'latest'); a standby that is down or
// paused follows when started or resumed. Promote returns once every
// running one streams from the new primary, or with an error naming those
// that do not. One that had replayed more of the old primary's WAL than
// the promoted node (asynchronous standbys can differ) cannot follow the
// new timeline: it is copied again from the new primary (a base backup
// across its link), losing the commits only it had, and so are those of
// its cascading standbys that had the same. Cascading standbys of the
// promoted node keep following it.
func (c *cluster) Promote(ctx context.Context, name string) error {
	n, err := c.controlled(name)
	if err != nil {
		return err
	}
	if c.plan.replication != Async && c.plan.replication != Sync {
		return fmt.Errorf("node %s: promote works on physical standbys (replication = \"async\" or \"sync\"), not %q", name, c.plan.replication)
	}
	c.topo.RLock()
	old, role := n.From, n.Role
	var others []*node // the other standbys of the old primary, spec order
	for _, o := range c.nodes {
		if o.From == old && o != n && old != "" {
			others = append(others, o)
		}
	}
	primary := slices.Contains(c.plan.primaries, old)
	syncOld := c.plan.syncNames
	c.topo.RUnlock()
	switch {
	case role != "standby" || !primary:
		return fmt.Errorf("node %s is not a standby of the primary: only a standby of the primary can be promoted", name)
	case n.pid() == 0:
		return fmt.Errorf("node %s is not running", name)
	}
	var names []string
	for _, o := range others {
		names = append(names, o.Name)
	}

	// Before the promotion: slots, synchronous standbys. If it fails, the
	// slots go (unused, they would keep WAL forever); the synchronous
	// standbys stay (a standby ignores them).
	var slots []string
	undo := func() {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, s := range slots {
			_ = n.exec(uctx, "", "SELECT pg_drop_replication_slot($1)", s)
		}
	}
	for _, o := range others {
		if err := n.createSlot(ctx, o.Name); err != nil {
			undo()
			return fmt.Errorf("node %s: replication slot for %s, before the promotion: %w", name, o.Name, err)
		}
		slots = append(slots, o.Name)
	}
	syncNew := syncNamesAfter(syncOld, names)
	if c.plan.replication == Sync {
		if err := c.setPrimarySetting(ctx, n, "synchronous_standby_names", syncNew); err != nil {
			undo()
			return fmt.Errorf("node %s: synchronous_standby_names, before the promotion: %w", name, err)
		}
	}

	start := time.Now()
	var ok bool
	if err := n.query1(ctx, "", "SELECT pg_promote(true, 60)", &ok); err != nil {
		undo()
		return fmt.Errorf("node %s: promote: %w", name, err)
	}
	if !ok { // still under way, maybe: the slots stay
		return fmt.Errorf("node %s: pg_promote did not finish within 60 s", name)
	}
	c.topo.Lock()
	c.plan.primaries = []string{name}
	c.plan.syncNames = syncNew
	n.Role, n.From = "primary", ""
	if o := c.byName[old]; o != nil {
		o.failedOver = true
	}
	for _, o := range others {
		o.From = name
	}
	c.topo.Unlock()
	fmt.Fprintf(c.log, "node %s: promoted to primary (%.2f s); %s is out of the cluster\n", name, time.Since(start).Seconds(), old)
	if c.plan.replication == Sync {
		if syncNew == "" {
			fmt.Fprintf(c.log, "node %s: synchronous_standby_names = '' (it was '%s'): no synchronous standby follows %s, its commits wait for none\n", name, syncOld, name)
		} else {
			fmt.Fprintf(c.log, "node %s: synchronous_standby_names = '%s' (it was '%s' at %s)\n", name, syncNew, syncOld, old)
		}
	}
	if len(others) == 0 {
		return nil
	}
	fork, tli, err := n.timelineStart(ctx)
	if err != nil {
		fmt.Fprintf(c.log, "node %s: where its new timeline begins is not known (%v): a standby that cannot follow it is found only by its stall\n", name, err)
	}

	// Which of them got further than the new timeline's start, read before
	// they are re-pointed (afterwards WAL of the new timeline arrives too):
	// they cannot follow it.
	ahead := c.aheadOf(ctx, others, n, fork)

	// After: re-point the others.
	var errs []error
	var follow []*node
	for _, o := range others {
		running, err := c.repoint(o, n)
		at := time.Since(start).Seconds()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("node %s: re-point to %s: %w", o.Name, name, err))
		case running:
			fmt.Fprintf(c.log, "node %s: re-pointed to %s (%.2f s after the promotion began)\n", o.Name, name, at)
			follow = append(follow, o)
		case o.pid() == 0:
			fmt.Fprintf(c.log, "node %s: re-pointed to %s in its configuration (%.2f s after the promotion began); it is down and follows %s when started\n", o.Name, name, at, name)
		default:
			fmt.Fprintf(c.log, "node %s: re-pointed to %s in its configuration (%.2f s after the promotion began); it is paused and follows %s when resumed\n", o.Name, name, at, name)
		}
	}
	errs = append(errs, enginekit.Each(follow, func(o *node) error { return c.follow(ctx, o, n, fork, tli, start, ahead[o]) }))
	return errors.Join(errs...)
}

// aheadOf says which running standbys of nodes have received or replayed
// WAL beyond fork, where the new primary's timeline begins: they hold
// commits the new primary never had. It reads each one's furthest
// position once; a standby whose position cannot be read, or any of them
// when fork is not known, is left to waitFollowing's own check.
func (c *cluster) aheadOf(ctx context.Context, nodes []*node, up *node, fork string) map[*node]error {
	out := map[*node]error{}
	if fork == "" {
		return out
	}
	for _, o := range nodes {
		if pid := o.pid(); pid == 0 || paused(pid) {
			continue
		}
		var pos string
		var beyond bool
		err := queryRowOn(ctx, o, `SELECT coalesce(greatest(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::text, ''),
			coalesce(greatest(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) > $1::pg_lsn, false)`, []any{fork}, &pos, &beyond)
		if err == nil && beyond {
			out[o] = fmt.Errorf("node %s %w %s: it received the old primary's WAL up to %s, beyond %s where the new timeline begins (it has commits the new primary never had)",
				o.Name, errDiverged, up.Name, pos, fork)
		}
	}
	return out
}

// follow waits until standby o streams from up on the new timeline tli
// (which begins at fork). One that cannot follow it is copied again from
// up — what an operator does when "standby follow" fails (pg_rewind needs
// wal_log_hints or data checksums, which the lab's servers do not have) —
// and then its own cascading standbys are checked the same way: they had
// what it had. Cascading standbys of one that follows follow by themselves.
func (c *cluster) follow(ctx context.Context, o, up *node, fork string, tli int64, start time.Time, ahead error) error {
	err := ahead
	if err == nil {
		err = c.waitFollowing(ctx, o, up, fork, tli)
	}
	copied := errors.Is(err, errDiverged)
	var below []*node
	var belowAhead map[*node]error
	if copied {
		fmt.Fprintf(c.log, "%v: copying it again from %s\n", err, up.Name)
		o.stop(15 * time.Second)
		// Its standbys get nothing more now: how far they got decides
		// whether they can follow its new copy.
		c.topo.RLock()
		for _, d := range c.nodes {
			if d.From == o.Name {
				below = append(below, d)
			}
		}
		c.topo.RUnlock()
		belowAhead = c.aheadOf(ctx, below, o, fork)
		if err = c.createStandby(ctx, o, up); err == nil {
			err = c.waitFollowing(ctx, o, up, "", tli)
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.log, "node %s: streaming from %s on timeline %d (%.2f s after the promotion began)\n", o.Name, up.Name, tli, time.Since(start).Seconds())
	if !copied {
		return nil
	}
	// The copy has none of o's slots: one for each standby below it, down
	// ones too.
	var errs []error
	var running []*node
	for _, d := range below {
		if err := o.createSlot(ctx, d.Name); err != nil {
			errs = append(errs, fmt.Errorf("node %s: replication slot for %s after its new copy: %w", o.Name, d.Name, err))
			continue
		}
		if pid := d.pid(); pid != 0 && !paused(pid) {
			running = append(running, d)
		}
	}
	errs = append(errs, enginekit.Each(running, func(d *node) error { return c.follow(ctx, d, o, fork, tli, start, belowAhead[d]) }))
	return errors.Join(errs...)
}

// syncNamesAfter is the new primary's synchronous_standby_names after a
// failover, from the old primary's (old, as makePlan wrote it): the same
// method (FIRST or ANY) over the standbys listed there that now follow the
// new primary (follow); the promoted node drops out of the list. The count
// stays, but never above the names left, so that commits still return
// ("FIRST 2 (s1, s2)", s1 promoted: "FIRST 1 (s2)"). A standby that was not
// listed stays asynchronous, cascading standbys of the promoted node too
// (they now stream from the primary). No name left: "" — the new primary
// has no synchronous standby.
func syncNamesAfter(old string, follow []string) string {
	m := standbysRE.FindStringSubmatch(old)
	if m == nil || strings.TrimSpace(old) == "" {
		return ""
	}
	var names []string
	for _, s := range strings.Split(m[3], ",") {
		if s = strings.TrimSpace(s); slices.Contains(follow, s) {
			names = append(names, s)
		}
	}
	if len(names) == 0 {
		return ""
	}
	method := strings.ToUpper(m[1])
	if method == "" {
		method = "FIRST"
	}
	k := 1
	if m[2] != "" {
		k, _ = strconv.Atoi(m[2])
	}
	return fmt.Sprintf("%s %d (%s)", method, min(max(k, 1), len(names)), strings.Join(names, ", "))
}

// repoint makes standby o stream from up: its configuration names up and
// the server, if it runs, reloads it (SIGHUP, what pg_reload_conf() sends;
// a paused server reloads when resumed). running: o runs and is not paused,
// so it should stream from up shortly.
func (c *cluster) repoint(o, up *node) (running bool, err error) {
	if err := o.writeConfig(standbyConf(o, up)); err != nil {
		return false, err
	}
	pid := o.pid()
	if pid == 0 {
		return false, nil
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return false, fmt.Errorf("reload: %w", err)
	}
	return !paused(pid), nil
}

// paused reports whether a process is stopped (SIGSTOP: Pause).
func paused(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && strings.HasPrefix(s[i+1:], " T")
}

// timelineStart reads where n's newest timeline begins (the switch point
// in its history file) and its number.
func (n *node) timelineStart(ctx context.Context) (lsn string, tli int64, err error) {
	var file, text string
	err = queryRowOn(ctx, n, `SELECT name, pg_read_file('pg_wal/' || name) FROM pg_ls_waldir()
		WHERE name ~ '^[0-9A-F]{8}\.history$' ORDER BY name DESC LIMIT 1`, nil, &file, &text)
	if err != nil {
		return "", 0, err
	}
	tli, err = strconv.ParseInt(strings.TrimSuffix(file, ".history"), 16, 64)
	if err != nil {
		return "", 0, fmt.Errorf("history file %s: %w", file, err)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) < 2 || !strings.Contains(f[1], "/") {
		return "", 0, fmt.Errorf("history file %s: last line %q", file, lines[len(lines)-1])
	}
	return f[1], tli, nil
}

// waitFollowing waits until standby o streams from up on up's timeline
// tli (or a later one): its WAL receiver streams from up's address and has
// received WAL of that timeline, and pg_stat_replication at up lists it
// streaming. It is bounded by ctx and, without progress, by
// c.flowTimeout(). It gives up at once when o, still on an older timeline,
// has replayed WAL beyond fork (where tli begins; "" if not known): o has
// commits up never had and cannot follow it.
func (c *cluster) waitFollowing(ctx context.Context, o, up *node, fork string, tli int64) error {
	_, err := enginekit.Poll{Stall: c.flowTimeout(),
		Permanent: func(err error) bool { return errors.Is(err, errDiverged) || permanent(err) },
		Log:       func(state string) { c.logf("  … node %s still waiting: %s\n", o.Name, state) },
	}.Until(ctx, func(ctx context.Context) (bool, string, error) {
		var replay, receiver string
		var following, beyond bool
		err := queryRowOn(ctx, o, `SELECT coalesce(pg_last_wal_replay_lsn()::text, ''),
			coalesce((SELECT status || ' from ' || coalesce(sender_host, '?') || ':' || coalesce(sender_port::text, '?') ||
				' on timeline ' || coalesce(received_tli::text, '?') FROM pg_stat_wal_receiver), 'not running'),
			coalesce((SELECT status = 'streaming' AND sender_host = $2 AND sender_port = $3 AND received_tli >= $4 FROM pg_stat_wal_receiver), false),
			coalesce(pg_last_wal_replay_lsn() > nullif($1, '')::pg_lsn AND coalesce((SELECT received_tli FROM pg_stat_wal_receiver), 0) < $4, false)`,
			[]any{fork, up.addr.Addr().String(), int(up.addr.Port()), tli}, &replay, &receiver, &following, &beyond)
		if err != nil {
			return false, "", err
		}
		if beyond {
			return false, "", fmt.Errorf("node %s %w %s: it replayed the old primary's WAL up to %s, beyond %s where the new timeline %d begins (it has commits the new primary never had)",
				o.Name, errDiverged, up.Name, replay, fork, tli)
		}
		state := "not connected"
		if err := up.query1(ctx, "", "SELECT coalesce(max(state), 'not connected') FROM pg_stat_replication WHERE application_name = $1", &state, o.Name); err != nil {
			return false, "", err
		}
		return following && state == "streaming", fmt.Sprintf("at %s: %s; at %s: replayed up to %s, WAL receiver %s", up.Name, state, o.Name, replay, receiver), nil
	})
	switch {
	case errors.Is(err, errDiverged):
		return err
	case err != nil:
		return fmt.Errorf("node %s: not streaming from the new primary %s: %w; log %s: %s", o.Name, up.Name, err, o.logPath, o.logTail())
	}
	return nil
}
