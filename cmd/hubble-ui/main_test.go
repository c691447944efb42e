package main

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlagsAreCheckedBeforeServing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	cases := []struct {
		args []string
		want string
	}{
		{nil, "TLS to the relay needs --tls-relay-ca-cert-files"},
		{[]string{"--tls-relay-ca-cert-files", missing, "--tls-relay-client-cert-file", missing, "--tls-relay-client-key-file", missing,
			"--tls-relay-server-name", ""}, "--tls-relay-server-name: required"},
		{[]string{"--tls-relay-ca-cert-files", missing, "--tls-relay-client-cert-file", missing, "--tls-relay-client-key-file", missing},
			"--tls-relay-client-cert-file"},
		{[]string{"--tls-to-relay-enabled=false", "--kubeconfig", missing}, "--kubeconfig " + missing},
	}
	for _, c := range cases {
		cfg := &config{}
		cmd := newCommand(cfg)
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		_, _, err := cfg.server(slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}
