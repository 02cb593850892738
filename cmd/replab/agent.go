package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"strings"

	"replab/internal/agent"
	"replab/internal/engine"
)

func cmdAgent(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlags("agent", "replab agent --engine postgres --dsn DSN --token-file FILE [--listen :7070]",
		`Runs replab's lag watcher beside a replica, for target mode (docs/agent.md): it
polls the replica's replab_lag table every millisecond while a driver watches,
and streams what changed, stamped with this host's clock, to the driver, which
estimates the offset between the two clocks over the same connection. It runs
no other query, answers only a driver that presents the token, and needs no
root. Ctrl-C stops it.`)
	listen := fs.String("listen", ":7070", "address to listen on")
	eng := fs.String("engine", "postgres", "the replica's engine: postgres or mariadb")
	dsn := fs.String("dsn", "", "the local replica's connection string (or REPLAB_AGENT_DSN); the password from the environment (PGPASSWORD, ~/.pgpass) or the DSN")
	tokenFile := fs.String("token-file", "", "file whose first line is the token drivers must present (or REPLAB_AGENT_TOKEN)")
	offset := fs.Duration("clock-offset", 0, "testing aid: add this to every time reported, as if this host's clock were that far off")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("agent: unexpected argument %q (see replab agent --help)", pos[0])
	}
	if *dsn == "" {
		*dsn = os.Getenv("REPLAB_AGENT_DSN")
	}
	if *dsn == "" {
		return fmt.Errorf("agent: give the local replica's connection string with --dsn or REPLAB_AGENT_DSN")
	}
	token := os.Getenv("REPLAB_AGENT_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("agent: token: %w", err)
		}
		token, _, _ = strings.Cut(strings.TrimRight(string(b), "\r\n"), "\n")
	}
	if token == "" {
		return fmt.Errorf("agent: give the token drivers must present with --token-file or REPLAB_AGENT_TOKEN")
	}
	open, err := replicaOpener(*eng, *dsn)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	srv, err := agent.NewServer(agent.ServerConfig{Listen: *listen, Token: token, Open: open, ClockOffset: *offset, Log: out})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	fmt.Fprintf(out, "agent: listening on %s for drivers (engine %s)\n", srv.Addr(), *eng)
	return srv.Serve(ctx)
}

// replicaOpener is how the agent opens pools to its replica: through the
// engine's side of target mode (engine.Attacher), found in the registry.
func replicaOpener(kind, dsn string) (func() (*sql.DB, error), error) {
	var kinds []string
	r := engines()
	for _, k := range r.Kinds() {
		if e, _ := r.Get(k); isAttacher(e) {
			kinds = append(kinds, k)
		}
	}
	e, _ := r.Get(kind)
	if !isAttacher(e) {
		return nil, fmt.Errorf("unknown engine %q: %s", kind, strings.Join(kinds, " or "))
	}
	open, err := e.(engine.Attacher).Opener(dsn)
	if err != nil {
		return nil, fmt.Errorf("--dsn is %w", err)
	}
	return open, nil
}

func isAttacher(e engine.Engine) bool {
	_, ok := e.(engine.Attacher)
	return ok
}
