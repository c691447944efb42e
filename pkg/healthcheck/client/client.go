// Package client talks to the agent's health API (Cilium's, on
// health.sock): what cilium-health and tests use, with Cilium's health
// models and nothing of the agent.
package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	healthmodels "github.com/cilium/cilium/api/v1/health/models"
)

// BasePath is the API's base path, as Cilium's openapi.yaml says.
const BasePath = "/v1beta"

// DefaultSocket is Cilium's health socket.
const DefaultSocket = "/var/run/cilium/health.sock"

// SocketEnv overrides DefaultSocket, as for Cilium's cilium-health.
const SocketEnv = "CILIUM_HEALTH_SOCK"

// Client is a health API client on a unix socket.
type Client struct {
	socket string
	http   *http.Client
}

// New is a client of the API at socket.
func New(socket string) *Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Status is GET /status: the last periodic probe's result.
func (c *Client) Status(ctx context.Context) (*healthmodels.HealthStatusResponse, error) {
	out := &healthmodels.HealthStatusResponse{}
	return out, c.do(ctx, http.MethodGet, "/status", out)
}

// Probe is PUT /status/probe: probe every node now.
func (c *Client) Probe(ctx context.Context) (*healthmodels.HealthStatusResponse, error) {
	out := &healthmodels.HealthStatusResponse{}
	return out, c.do(ctx, http.MethodPut, "/status/probe", out)
}

// Healthz is GET /healthz: the local agent's health.
func (c *Client) Healthz(ctx context.Context) (*healthmodels.HealthResponse, error) {
	out := &healthmodels.HealthResponse{}
	return out, c.do(ctx, http.MethodGet, "/healthz", out)
}

func (c *Client) do(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://localhost"+BasePath+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s on %s: %w (is cilium-agent running, with --enable-health-checking?)", method, path, c.socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: decode: %w", method, path, err)
	}
	return nil
}
