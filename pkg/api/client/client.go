// Package client talks to the agent's REST API over its unix socket. The
// CNI plugin and cilium-dbg use it; its bodies are pkg/api/models.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cilium-go/cilium/pkg/api/models"
)

// DefaultSocket is where the agent listens unless told otherwise.
const DefaultSocket = "/var/run/cilium/cilium.sock"

// Client is safe for concurrent use.
type Client struct {
	socket string
	http   *http.Client
}

// New talks to the agent at socket ("" for DefaultSocket).
func New(socket string) *Client {
	if socket == "" {
		socket = DefaultSocket
	}
	var d net.Dialer
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression: true,
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// IsNotFound reports whether err is the agent's 404.
func IsNotFound(err error) bool {
	var e *models.Error
	return errors.As(err, &e) && e.Code == http.StatusNotFound
}

// do sends in (if not nil) and decodes the answer into out (if not nil).
// Answers other than 2xx come back as *models.Error.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://agent"+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrUnreachable, c.socket, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		if health, ok := out.(*models.Health); ok && resp.StatusCode == http.StatusServiceUnavailable &&
			json.Unmarshal(b, health) == nil && health.Modules != nil {
			// A degraded agent's health is the answer, not an error body.
			return fmt.Errorf("%s %s: %w", method, path, &models.Error{Code: resp.StatusCode, Message: "agent degraded"})
		}
		return fmt.Errorf("%s %s: %w", method, path, errorBody(resp.StatusCode, b))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// ErrUnreachable: no agent answers on the socket.
var ErrUnreachable = errors.New("agent unreachable")

// errorBody is the error an answer other than 2xx carries.
func errorBody(code int, b []byte) *models.Error {
	e := &models.Error{}
	if json.Unmarshal(b, e) != nil || e.Message == "" {
		e = &models.Error{Code: code, Message: http.StatusText(code)}
	}
	return e
}

// Monitor streams the node's datapath events of types (all when none)
// to fn until ctx ends (nil) or fn fails (its error).
func (c *Client) Monitor(ctx context.Context, types []string, fn func(models.MonitorEvent) error) error {
	q := url.Values{"type": types}
	path := "/v1/monitor"
	if len(types) > 0 {
		path += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent"+path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrUnreachable, c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %w", path, errorBody(resp.StatusCode, b))
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev models.MonitorEvent
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("GET %s: %w", path, err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// Healthz is the agent's health. A degraded agent answers 503, which
// comes back as an error together with the details.
func (c *Client) Healthz(ctx context.Context) (models.Health, error) {
	var h models.Health
	err := c.do(ctx, http.MethodGet, "/v1/healthz", nil, &h)
	return h, err
}

// Config is the agent's configuration.
func (c *Client) Config(ctx context.Context) (models.Config, error) {
	var out models.Config
	return out, c.do(ctx, http.MethodGet, "/v1/config", nil, &out)
}

// PatchConfig changes options.
func (c *Client) PatchConfig(ctx context.Context, p models.ConfigPatch) (models.Config, error) {
	var out models.Config
	return out, c.do(ctx, http.MethodPatch, "/v1/config", p, &out)
}

// AllocateIP takes an address for owner (a container id).
func (c *Client) AllocateIP(ctx context.Context, owner string) (models.IPAMResponse, error) {
	var out models.IPAMResponse
	return out, c.do(ctx, http.MethodPost, "/v1/ipam", models.IPAMRequest{Owner: owner}, &out)
}

// Allocations lists the pod addresses handed out and their owners.
func (c *Client) Allocations(ctx context.Context) ([]models.IPAMAllocation, error) {
	var out []models.IPAMAllocation
	return out, c.do(ctx, http.MethodGet, "/v1/ipam", nil, &out)
}

// ReleaseIP frees an address.
func (c *Client) ReleaseIP(ctx context.Context, ip string) error {
	return c.do(ctx, http.MethodDelete, "/v1/ipam/"+url.PathEscape(ip), nil, nil)
}

func endpointPath(containerID string) string {
	return "/v1/endpoint/" + url.PathEscape("container-id:"+containerID)
}

// PutEndpoint creates the container's endpoint; it returns once the
// endpoint's datapath is live.
func (c *Client) PutEndpoint(ctx context.Context, r models.EndpointRequest) (models.Endpoint, error) {
	var out models.Endpoint
	return out, c.do(ctx, http.MethodPut, endpointPath(r.ContainerID), r, &out)
}

// GetEndpoint finds the container's endpoint.
func (c *Client) GetEndpoint(ctx context.Context, containerID string) (models.Endpoint, error) {
	var out models.Endpoint
	return out, c.do(ctx, http.MethodGet, endpointPath(containerID), nil, &out)
}

// DeleteEndpoint removes the container's endpoint and frees its address.
func (c *Client) DeleteEndpoint(ctx context.Context, containerID string) error {
	return c.do(ctx, http.MethodDelete, endpointPath(containerID), nil, nil)
}

// Endpoints lists the node's endpoints.
func (c *Client) Endpoints(ctx context.Context) ([]models.Endpoint, error) {
	var out []models.Endpoint
	return out, c.do(ctx, http.MethodGet, "/v1/endpoint", nil, &out)
}

// Identities lists the identities in use on the node.
func (c *Client) Identities(ctx context.Context) ([]models.Identity, error) {
	var out []models.Identity
	return out, c.do(ctx, http.MethodGet, "/v1/identity", nil, &out)
}

// Maps lists the node's BPF maps.
func (c *Client) Maps(ctx context.Context) ([]models.BPFMap, error) {
	var out []models.BPFMap
	return out, c.do(ctx, http.MethodGet, "/v1/map", nil, &out)
}

// IPCache lists the node's ipcache as the datapath holds it.
func (c *Client) IPCache(ctx context.Context) ([]models.IPCacheEntry, error) {
	var out []models.IPCacheEntry
	return out, c.do(ctx, http.MethodGet, "/v1/ipcache", nil, &out)
}

// FQDNCache lists what endpoints learned from allowed DNS answers, with
// GET /v1/fqdn/cache's query (matchpattern, cidr, source), of one
// endpoint when endpoint is not empty.
func (c *Client) FQDNCache(ctx context.Context, endpoint string, query url.Values) ([]models.DNSLookup, error) {
	path := "/v1/fqdn/cache"
	if endpoint != "" {
		path += "/" + url.PathEscape(endpoint)
	}
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var out []models.DNSLookup
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// Nodes lists the cluster's nodes the agent knows; an agent without
// Kubernetes answers 501.
func (c *Client) Nodes(ctx context.Context) ([]models.Node, error) {
	var out []models.Node
	return out, c.do(ctx, http.MethodGet, "/v1/node", nil, &out)
}

// Services lists the frontends the agent balances.
func (c *Client) Services(ctx context.Context) ([]models.Service, error) {
	var out []models.Service
	return out, c.do(ctx, http.MethodGet, "/v1/service", nil, &out)
}

// GetEndpointByID finds an endpoint by its numeric id.
func (c *Client) GetEndpointByID(ctx context.Context, id uint16) (models.Endpoint, error) {
	var out models.Endpoint
	return out, c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/endpoint/%d", id), nil, &out)
}

// Policy is the agent's policy: its rules (PolicyRules decodes them) and
// revision; an agent without a policy engine answers 501.
func (c *Client) Policy(ctx context.Context) (models.Policy, error) {
	var out models.Policy
	return out, c.do(ctx, http.MethodGet, "/v1/policy", nil, &out)
}

// PolicyRules lists the rules of the agent's policy engine.
func (c *Client) PolicyRules(ctx context.Context) ([]models.PolicyRule, error) {
	p, err := c.Policy(ctx)
	if err != nil {
		return nil, err
	}
	return p.Rules()
}

// Get decodes the answer of GET path into out: for the routes whose
// bodies are Cilium's models (GET /v1/metrics/), which this package does
// not link, so that the CNI plugin stays small.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

// PolicySelectors lists the policy engine's selector cache.
func (c *Client) PolicySelectors(ctx context.Context) ([]models.PolicySelector, error) {
	var out []models.PolicySelector
	return out, c.do(ctx, http.MethodGet, "/v1/policy/selectors", nil, &out)
}

// PolicyTrace asks for policy's verdict on a new connection from src to
// dst, to port of protocol (tcp, udp, sctp or icmp, whose port is the
// type).
func (c *Client) PolicyTrace(ctx context.Context, src, dst, protocol string, port uint16) (models.PolicyTrace, error) {
	q := url.Values{"src": {src}, "dst": {dst}, "protocol": {protocol}, "dport": {strconv.Itoa(int(port))}}
	var out models.PolicyTrace
	return out, c.do(ctx, http.MethodGet, "/v1/policy/trace?"+q.Encode(), nil, &out)
}
