package pipeline_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"replab/internal/pipeline"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: no PEM certificate", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMakeTLS: the collector's certificate verifies with the CA for each
// host asked for and no other; the key is private to its owner; each call
// makes a new CA.
func TestMakeTLS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	f, err := pipeline.MakeTLS(dir, []string{"127.0.0.1", "collector.lab", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{f.CA, f.Cert, f.Key} {
		if !filepath.IsAbs(p) || filepath.Dir(p) != dir {
			t.Errorf("%s: want an absolute path in %s", p, dir)
		}
	}
	if fi, err := os.Stat(f.Key); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("key %s has mode %v, want 0600", f.Key, fi.Mode().Perm())
	}
	if _, err := os.ReadFile(f.Key); err != nil {
		t.Fatal(err)
	}
	ca, cert := readCert(t, f.CA), readCert(t, f.Cert)
	if !ca.IsCA {
		t.Error("the CA certificate is not a CA")
	}
	if now := time.Now(); cert.NotBefore.After(now.Add(-50*time.Minute)) || cert.NotAfter.Before(now.AddDate(9, 11, 0)) {
		t.Errorf("valid %v to %v: want from an hour ago for ten years", cert.NotBefore, cert.NotAfter)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	verify := func(c *x509.Certificate, host string) error {
		_, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err
	}
	for _, host := range []string{"127.0.0.1", "collector.lab", "::1"} {
		if err := verify(cert, host); err != nil {
			t.Errorf("host %s: %v", host, err)
		}
	}
	for _, host := range []string{"127.0.0.2", "other.lab", "localhost"} {
		if err := verify(cert, host); err == nil {
			t.Errorf("the certificate verifies for %s, which it was not made for", host)
		}
	}
	if len(cert.IPAddresses) != 2 || len(cert.DNSNames) != 1 {
		t.Errorf("IPs %v, names %v: want 2 IPs and 1 name", cert.IPAddresses, cert.DNSNames)
	}

	// Again: a new CA, which the old certificate does not verify with.
	if _, err := pipeline.MakeTLS(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(readCert(t, f.CA))
	if err := verify(cert, "127.0.0.1"); err == nil {
		t.Error("the old certificate verifies with the new CA")
	}
	if err := verify(readCert(t, f.Cert), "127.0.0.1"); err != nil {
		t.Errorf("the new certificate: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	if _, err := pipeline.MakeTLS(t.TempDir(), nil); err == nil {
		t.Error("MakeTLS without hosts succeeded")
	}
}

// TestTLSPumpToPlainCollector: a pump that wants TLS fails at the
// handshake against a plain collector, which keeps waiting.
func TestTLSPumpToPlainCollector(t *testing.T) {
	dir := t.TempDir()
	local, remote := filepath.Join(dir, "local.trail"), filepath.Join(dir, "remote.trail")
	writeTestTrail(t, local, 5, 20)
	files, err := pipeline.MakeTLS(filepath.Join(dir, "tls"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ln := loopback(t)
	col := run(t, func(ctx context.Context) error {
		return pipeline.Collect(ctx, ln, pipeline.CollectorConfig{Trail: remote}, nil)
	})
	ctx, cancel := context.WithTimeout(context.Background(), copyWithin)
	defer cancel()
	err = pipeline.Pump(ctx, pipeline.PumpConfig{Name: "t1", Trail: local, Addr: ln.Addr().String(), TLS: &files}, nil)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("a TLS pump against a plain collector: %v (ctx %v), want a handshake error", err, ctx.Err())
	}
	for _, want := range []string{"pump t1", "TLS handshake with the collector at " + ln.Addr().String()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	t.Log(err)
	if err, ok := col.ended(50 * time.Millisecond); ok {
		t.Fatalf("the collector ended: %v", err)
	}
	if err := col.stop(t); err != nil {
		t.Error(err)
	}
}

// TestPlainPumpToTLSCollector: a pump without TLS fails against a TLS
// collector, which keeps waiting and then takes a TLS pump that copies
// the whole trail.
func TestPlainPumpToTLSCollector(t *testing.T) {
	dir := t.TempDir()
	local, remote := filepath.Join(dir, "local.trail"), filepath.Join(dir, "remote.trail")
	info := writeTestTrail(t, local, 6, 300)
	files, err := pipeline.MakeTLS(filepath.Join(dir, "tls"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ln := loopback(t)
	var co pipeline.Counters
	col := run(t, func(ctx context.Context) error {
		return pipeline.Collect(ctx, ln, pipeline.CollectorConfig{Trail: remote, TLS: &files}, &co)
	})
	pcfg := pipeline.PumpConfig{Name: "t1", Trail: local, Addr: ln.Addr().String(), Codec: "zstd", Compress: 3}
	for range 2 { // twice: the collector survives each
		ctx, cancel := context.WithTimeout(context.Background(), copyWithin)
		err := pipeline.Pump(ctx, pcfg, nil)
		failedByItself := ctx.Err() == nil
		cancel()
		if err == nil || !failedByItself {
			t.Fatalf("a plain pump against a TLS collector: %v, want an error", err)
		}
		if !strings.Contains(err.Error(), "pump t1") {
			t.Errorf("error %q does not name the pump", err)
		}
		t.Log(err)
	}
	if err, ok := col.ended(50 * time.Millisecond); ok {
		t.Fatalf("the collector ended after a plain pump: %v", err)
	}
	if n := co.Bytes.Load(); n != 0 {
		t.Fatalf("the collector wrote %d bytes from plain pumps", n)
	}

	pcfg.TLS = &files
	var pu pipeline.PumpCounters
	pmp := run(t, func(ctx context.Context) error { return pipeline.Pump(ctx, pcfg, &pu) })
	waitCopied(t, info.size, &co, &pu, col, pmp)
	stopAndCompare(t, pmp, col, local, remote)
}

// TestTLSWrongHost: a collector certificate made for another host is
// refused by the pump.
func TestTLSWrongHost(t *testing.T) {
	dir := t.TempDir()
	local, remote := filepath.Join(dir, "local.trail"), filepath.Join(dir, "remote.trail")
	writeTestTrail(t, local, 7, 5)
	files, err := pipeline.MakeTLS(filepath.Join(dir, "tls"), []string{"collector.elsewhere", "10.9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	ln := loopback(t)
	run(t, func(ctx context.Context) error {
		return pipeline.Collect(ctx, ln, pipeline.CollectorConfig{Trail: remote, TLS: &files}, nil)
	})
	ctx, cancel := context.WithTimeout(context.Background(), copyWithin)
	defer cancel()
	err = pipeline.Pump(ctx, pipeline.PumpConfig{Name: "t1", Trail: local, Addr: ln.Addr().String(), TLS: &files}, nil)
	if err == nil || !strings.Contains(err.Error(), "TLS handshake") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("a pump to a collector certified for other hosts: %v, want a handshake error", err)
	}
	t.Log(err)
}

// TestTLSBadFiles: a collector or pump whose TLS files are missing or
// not PEM fails at once, naming the file.
func TestTLSBadFiles(t *testing.T) {
	dir := t.TempDir()
	good, err := pipeline.MakeTLS(filepath.Join(dir, "tls"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name  string
		files pipeline.TLSFiles
		want  string
	}{
		{"missing cert", pipeline.TLSFiles{Cert: missing, Key: good.Key}, missing},
		{"missing key", pipeline.TLSFiles{Cert: good.Cert, Key: missing}, missing},
		{"junk key", pipeline.TLSFiles{Cert: good.Cert, Key: junk}, junk},
		{"junk cert", pipeline.TLSFiles{Cert: junk, Key: good.Key}, junk},
		{"key of another cert", pipeline.TLSFiles{Cert: good.CA, Key: good.Key}, good.CA},
	} {
		t.Run("collector "+tc.name, func(t *testing.T) {
			ln := loopback(t)
			ctx, cancel := context.WithTimeout(context.Background(), copyWithin)
			defer cancel()
			err := pipeline.Collect(ctx, ln, pipeline.CollectorConfig{Trail: filepath.Join(t.TempDir(), "r.trail"), TLS: &tc.files}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("collector with %+v: %v, want an error naming %s", tc.files, err, tc.want)
			}
		})
	}
	for _, ca := range []string{missing, junk} {
		ctx, cancel := context.WithTimeout(context.Background(), copyWithin)
		err := pipeline.Pump(ctx, pipeline.PumpConfig{Name: "t1", Trail: "unused", Addr: "127.0.0.1:1", TLS: &pipeline.TLSFiles{CA: ca}}, nil)
		cancel()
		if err == nil || !strings.Contains(err.Error(), ca) {
			t.Errorf("pump with CA %s: %v, want an error naming it", ca, err)
		}
	}
}
