package pipeline

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the PEM files that encrypt the pump's connection to its
// collector (GoldenGate's ENCRYPT): the CA the pump trusts, and the
// collector's certificate and key, signed by that CA.
type TLSFiles struct {
	CA   string `json:"ca"`
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// The files MakeTLS writes in its directory.
const (
	tlsCAFile   = "ca.pem"
	tlsCertFile = "collector.pem"
	tlsKeyFile  = "collector-key.pem"
)

// tlsHandshakeWithin bounds a collector's TLS handshake.
const tlsHandshakeWithin = 10 * time.Second

// MakeTLS writes a fresh self-signed CA (ECDSA P-256) and a collector
// certificate it signs for hosts (IP addresses or DNS names) into dir as
// ca.pem, collector.pem and collector-key.pem (mode 0600), valid from an
// hour ago (clock skew between sites) for ten years. It always
// regenerates, replacing each file atomically; the CA's key is not kept,
// so nothing else can be signed with it.
func MakeTLS(dir string, hosts []string) (TLSFiles, error) {
	if len(hosts) == 0 {
		return TLSFiles{}, errors.New("make TLS: no collector hosts to certify")
	}
	var ips []net.IP
	var names []string
	for _, h := range hosts {
		if h == "" {
			return TLSFiles{}, errors.New("make TLS: an empty collector host")
		}
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			names = append(names, h)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("make TLS in %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return TLSFiles{}, fmt.Errorf("make TLS: %w", err)
	}
	now := time.Now()
	notBefore, notAfter := now.Add(-time.Hour), now.AddDate(10, 0, 0)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("make TLS: CA key: %w", err)
	}
	caSerial, err := serial()
	if err != nil {
		return TLSFiles{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               pkix.Name{CommonName: "replab pipeline CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("make TLS: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("make TLS: CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("make TLS: collector key: %w", err)
	}
	certSerial, err := serial()
	if err != nil {
		return TLSFiles{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: certSerial,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
		IPAddresses:  ips,
	}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("make TLS: collector certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return TLSFiles{}, fmt.Errorf("make TLS: collector key: %w", err)
	}

	f := TLSFiles{
		CA:   filepath.Join(abs, tlsCAFile),
		Cert: filepath.Join(abs, tlsCertFile),
		Key:  filepath.Join(abs, tlsKeyFile),
	}
	// The key first: a certificate is never on disk without its key.
	for _, w := range []struct {
		path, kind string
		der        []byte
		mode       os.FileMode
	}{
		{f.Key, "PRIVATE KEY", keyDER, 0o600},
		{f.Cert, "CERTIFICATE", certDER, 0o644},
		{f.CA, "CERTIFICATE", caDER, 0o644},
	} {
		if err := writeFileAtomic(w.path, pem.EncodeToMemory(&pem.Block{Type: w.kind, Bytes: w.der}), w.mode); err != nil {
			return TLSFiles{}, fmt.Errorf("make TLS: %w", err)
		}
	}
	return f, nil
}

// serial is a random 128-bit certificate serial number.
func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("make TLS: serial number: %w", err)
	}
	return n, nil
}

// writeFileAtomic replaces path with b: readers see the old file or the
// new one, never a part; the mode is set before any byte is written.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// clientConfig is the pump's side: trust only f.CA, and check the
// collector's certificate for the host of addr.
func (f *TLSFiles) clientConfig(addr string) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("TLS: collector address %s: %w", addr, err)
	}
	if f.CA == "" {
		return nil, errors.New("TLS: no CA file")
	}
	b, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", f.CA)
	}
	return &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS13}, nil
}

// serverConfig is the collector's side: present f.Cert with f.Key.
func (f *TLSFiles) serverConfig() (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("TLS: no certificate or key file")
	}
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, fmt.Errorf("TLS key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w", f.Cert, f.Key, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, nil
}
