// Package certloader keeps a TLS configuration in step with the files it
// was read from: a certificate or CA that Kubernetes renews in a mounted
// Secret reaches a running server or client at its next handshake, with
// no restart. Files that do not load (half written, a key that is not the
// certificate's) leave the last good ones in use.
package certloader

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// Files names a key pair and the CAs that verify the other side, with
// the flags that named them, for errors.
type Files struct {
	Cert, Key string
	CertFlags string // e.g. "--hubble-tls-cert-file, --hubble-tls-key-file"
	CAs       []string
	CAFlag    string
}

// checkEvery is how often a handshake looks at the files again at most.
const checkEvery = time.Second

// Loader holds what the files held when they last loaded.
type Loader struct {
	files Files
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	checked time.Time
	stamp   string // the files' identity, size and time when they loaded
	cert    *tls.Certificate
	pool    *x509.CertPool // nil without CAs
	failed  string         // the last load's error, logged once
}

// New reads the files, and fails if they do not load.
func New(files Files, log *slog.Logger) (*Loader, error) {
	l := &Loader{files: files, log: log, every: checkEvery}
	stamp, err := l.stampFiles()
	if err == nil {
		err = l.load(stamp)
	}
	if err != nil {
		return nil, err
	}
	l.checked = time.Now()
	return l, nil
}

// stampFiles tells a change of any file: Kubernetes swaps a Secret's
// files for new ones, an editor rewrites one in place.
func (l *Loader) stampFiles() (string, error) {
	var stamp []byte
	for i, name := range append([]string{l.files.Cert, l.files.Key}, l.files.CAs...) {
		fi, err := os.Stat(name)
		if err != nil {
			if i < 2 {
				return "", fmt.Errorf("%s: %w", l.files.CertFlags, err)
			}
			return "", fmt.Errorf("%s: %w", l.files.CAFlag, err)
		}
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		stamp = fmt.Appendf(stamp, "%s:%d:%d:%d;", name, ino, fi.Size(), fi.ModTime().UnixNano())
	}
	return string(stamp), nil
}

func (l *Loader) load(stamp string) error {
	cert, err := tls.LoadX509KeyPair(l.files.Cert, l.files.Key)
	if err != nil {
		return fmt.Errorf("%s: %w", l.files.CertFlags, err)
	}
	var pool *x509.CertPool
	if len(l.files.CAs) > 0 {
		if pool, err = CertPool(l.files.CAFlag, l.files.CAs); err != nil {
			return err
		}
	}
	l.cert, l.pool, l.stamp = &cert, pool, stamp
	return nil
}

// current is what the files hold now, looking at them again at most
// every l.every.
func (l *Loader) current() (*tls.Certificate, *x509.CertPool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.checked) >= l.every {
		l.checked = now
		stamp, err := l.stampFiles()
		if err == nil && stamp != l.stamp {
			if err = l.load(stamp); err == nil {
				l.log.Info("TLS files reloaded", "cert", l.files.Cert)
			}
		}
		if err != nil && err.Error() != l.failed {
			l.log.Warn("TLS files do not load; the last good ones stay in use", "error", err)
		}
		l.failed = ""
		if err != nil {
			l.failed = err.Error()
		}
	}
	return l.cert, l.pool
}

// ServerConfig is a server's TLS: its certificate and, with CAs, mutual
// TLS that refuses a client without a certificate they signed.
func (l *Loader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := l.current()
			cfg := &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS13}
			if pool != nil {
				cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
			}
			return cfg, nil
		},
	}
}

// ClientConfig is a client's TLS: its certificate, and the server's
// verified against the CAs as they are at each handshake for the
// ServerName the caller sets. (crypto/tls reads RootCAs once; the
// verification is done here instead, as Go's VerifyConnection example
// does.)
func (l *Loader) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := l.current()
			return cert, nil
		},
		InsecureSkipVerify: true, // VerifyConnection verifies
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, pool := l.current()
			if pool == nil {
				return errors.New("no CA to verify the server with")
			}
			if cs.ServerName == "" {
				return errors.New("no server name to verify the server's certificate for")
			}
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			opts := x509.VerifyOptions{DNSName: cs.ServerName, Roots: pool, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		},
	}
}

// CertPool reads the PEM certificates of files, the CAs a flag names.
func CertPool(flag string, files []string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", flag, f)
		}
	}
	return pool, nil
}
