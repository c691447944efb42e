package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// tlsPrefix in --server asks for TLS, as in Hubble's CLI.
const tlsPrefix = "tls://"

// tlsFlags are Hubble's CLI's flags for a server that speaks TLS, such
// as a relay.
type tlsFlags struct {
	enabled, allowInsecure bool
	caFiles                []string
	certFile, keyFile      string
	serverName             string
}

func (f *tlsFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enabled, "tls", false, "connect with TLS (also when --server starts with tls://)")
	fs.BoolVar(&f.allowInsecure, "tls-allow-insecure", false, "do not verify the server's certificate (open to a machine in the middle)")
	fs.StringSliceVar(&f.caFiles, "tls-ca-cert-files", nil, "CA certificates (PEM) that verify the server's; the system's without")
	fs.StringVar(&f.certFile, "tls-client-cert-file", "", "the client certificate (PEM) for a server that asks for one (mutual TLS)")
	fs.StringVar(&f.keyFile, "tls-client-key-file", "", "the client certificate's key (PEM)")
	fs.StringVar(&f.serverName, "tls-server-name", "",
		"the name the server's certificate must carry (e.g. hubble.hubble-relay.cilium.io); the --server host without")
}

// credentials are the transport towards server, and server as gRPC
// dials it.
func (f *tlsFlags) credentials(server string) (credentials.TransportCredentials, string, error) {
	target, prefixed := strings.CutPrefix(server, tlsPrefix)
	if (f.certFile == "") != (f.keyFile == "") {
		return nil, "", errors.New("--tls-client-cert-file and --tls-client-key-file go together")
	}
	if !f.enabled && !prefixed {
		if f.certFile != "" || len(f.caFiles) > 0 || f.serverName != "" || f.allowInsecure {
			return nil, "", errors.New("the --tls-* flags need --tls (or --server tls://...)")
		}
		return insecure.NewCredentials(), target, nil
	}
	cfg := &tls.Config{ServerName: f.serverName, InsecureSkipVerify: f.allowInsecure, MinVersion: tls.VersionTLS12}
	if len(f.caFiles) > 0 {
		cfg.RootCAs = x509.NewCertPool()
		for _, name := range f.caFiles {
			pem, err := os.ReadFile(name)
			if err != nil {
				return nil, "", fmt.Errorf("--tls-ca-cert-files: %w", err)
			}
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, "", fmt.Errorf("--tls-ca-cert-files: %s holds no PEM certificate", name)
			}
		}
	}
	if f.certFile != "" {
		kp, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return nil, "", fmt.Errorf("--tls-client-cert-file, --tls-client-key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return credentials.NewTLS(cfg), target, nil
}
