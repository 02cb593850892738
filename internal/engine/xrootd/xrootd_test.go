package xrootd

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"replab/internal/engine"
	"replab/internal/labtest"
	"replab/internal/pagedata"
	"replab/internal/spec"
	"replab/internal/testkit"
	"replab/internal/xrd"
)

var pairSpec = testkit.ReadFile("testdata/pair.toml")

func requireXRootD(t *testing.T) {
	t.Helper()
	testkit.Need(t, testkit.Lab, testkit.XRootD)
}

// TestServerServesTheGeneratedDataSet: the server comes up in its site,
// serves the generated files across the link, byte for byte, and node
// control stops, starts, kills and pauses it.
func TestServerServesTheGeneratedDataSet(t *testing.T) {
	t.Parallel()
	requireXRootD(t)
	l, c := labtest.Cluster(t, Engine{}, "xrdsrv", pairSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := c.(engine.PageServer)
	files := ps.Files()
	if len(files) != 2 || files[1].Size != 1<<20 || files[1].Seed != l.Spec.Run.Seed || files[1].Index != 1 {
		t.Fatalf("files: %+v", files)
	}
	nodes := c.Nodes()
	if len(nodes) != 1 || nodes[0].Role != "server" || !nodes[0].Writable || nodes[0].Version == "" ||
		!strings.HasPrefix(nodes[0].DSN, "root://"+nodes[0].Addr.String()) {
		t.Fatalf("nodes: %+v", nodes)
	}
	cli := l.Site("cli")
	read := func() error {
		conn, err := xrd.Dial(ctx, cli.DialContext, nodes[0].Addr.String(), "t")
		if err != nil {
			return err
		}
		defer conn.Close()
		for _, f := range files {
			h, err := conn.Open(ctx, f.Path)
			if err != nil {
				return err
			}
			if h.Size() != f.Size {
				t.Errorf("%s: size %d, want %d", f.Path, h.Size(), f.Size)
			}
			buf := make([]byte, 8192)
			for off := int64(0); off < f.Size; off += int64(len(buf)) {
				n, err := h.ReadAt(ctx, buf, off)
				if err != nil && err != io.EOF {
					return err
				}
				if err := pagedata.Check(f.Seed, f.Index, off, buf[:n]); err != nil {
					t.Fatalf("%s: %v", f.Path, err)
				}
			}
		}
		return nil
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	procs, err := c.Processes(ctx)
	if err != nil || len(procs) != 1 || procs[0].Role != "server" || procs[0].PID == 0 {
		t.Fatalf("processes: %+v, %v", procs, err)
	}

	nc := c.(engine.NodeControl)
	if err := nc.Kill(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := read(); err == nil {
		t.Fatal("a killed server served the files")
	}
	if err := c.WaitFlowing(ctx); err == nil {
		t.Error("WaitFlowing passed with the server down")
	}
	if err := nc.Start(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := read(); err != nil {
		t.Fatalf("after the restart: %v", err)
	}

	pz := c.(engine.Pauser)
	if err := pz.Pause(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	_, perr := xrd.Dial(pctx, cli.DialContext, nodes[0].Addr.String(), "t")
	pcancel()
	if perr == nil {
		t.Error("a paused server answered a login")
	}
	if err := pz.Resume(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitFlowing(ctx); err != nil {
		t.Fatalf("after resume: %v", err)
	}
	if err := nc.Stop(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "s1") {
		t.Errorf("unknown node: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"role", `role = "server"`, `role = "primary"`, `pairSpec.toml:13: node.s1.role: unknown role "primary" for engine xrootd`},
		{"replication", "[scheme]\n", "[scheme]\nreplication = \"async\"\n", "scheme.replication: XRootD serves files and replicates nothing"},
		{"size", `file_size = "1MiB"`, `file_size = "1kbit"`, "scheme.file_size: sizes are in bytes, not bits"},
		{"files", "files = 2", "files = 0", "scheme.files: want a whole number from 1 to 1000"},
		{"unknown", "files = 2", "pages = 2", "scheme.pages: unknown option for engine xrootd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := strings.Replace(strings.Replace(pairSpec, c.from, c.to, 1), "NAME", "v", 1)
			s, err := spec.Parse("pairSpec.toml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			err = Engine{}.Validate(s)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	s, err := spec.Parse("pairSpec.toml", []byte(strings.Replace(pairSpec, "NAME", "v", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := (Engine{}).Validate(s); err != nil {
		t.Errorf("a good spec: %v", err)
	}
}
