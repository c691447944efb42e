package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cilium-go/cilium/pkg/api/models"
)

// PolicyExplainer is the policy engine as the API shows it: its rules,
// its selector cache, the endpoints' policies and the verdict on a
// connection. Without one the policy routes answer 501.
type PolicyExplainer interface {
	PolicyRules(ctx context.Context) ([]models.PolicyRule, error)
	PolicySelectors(ctx context.Context) ([]models.PolicySelector, error)
	// EndpointPolicy is nil, without an error, for an endpoint the engine
	// does not know (yet).
	EndpointPolicy(ctx context.Context, id uint16) (*models.EndpointPolicy, error)
	// PolicyTrace judges a new connection from src to dst, peers as GET
	// /v1/policy/trace takes them, to protocol proto (spec.ProtoTCP, ...)
	// and port. A peer that names nothing known is a *PeerError.
	PolicyTrace(ctx context.Context, src, dst string, proto uint8, port uint16) (models.PolicyTrace, error)
	// PolicyRevision counts the changes of the agent's policies, from 1.
	PolicyRevision(ctx context.Context) (uint64, error)
}

// PeerError is a traced peer that names nothing the agent knows: the
// client's mistake.
type PeerError struct {
	Param string // src or dst
	Err   error
}

func (e *PeerError) Error() string { return e.Param + ": " + e.Err.Error() }
func (e *PeerError) Unwrap() error { return e.Err }

// policyTimeout bounds the wait for the engine, which answers between
// two changes; past it the answer is 503.
const policyTimeout = 10 * time.Second

// noPolicy answers 501 and reports true when the agent has no engine.
func (s *Server) noPolicy(w http.ResponseWriter) bool {
	if s.p.Policy == nil {
		writeError(w, http.StatusNotImplemented, errors.New("policy: the agent runs without a policy engine"))
		return true
	}
	return false
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request) {
	if s.noPolicy(w) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), policyTimeout)
	defer cancel()
	// The revision first: the rules are then at least as new as it says.
	rev, err := s.p.Policy.PolicyRevision(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	rules, err := s.p.Policy.PolicyRules(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	if rules == nil {
		rules = []models.PolicyRule{}
	}
	text, err := json.Marshal(rules)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, models.Policy{Policy: string(text), Revision: rev})
}

func (s *Server) getPolicySelectors(w http.ResponseWriter, r *http.Request) {
	if s.noPolicy(w) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), policyTimeout)
	defer cancel()
	out, err := s.p.Policy.PolicySelectors(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	if out == nil {
		out = []models.PolicySelector{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getPolicyTrace(w http.ResponseWriter, r *http.Request) {
	if s.noPolicy(w) {
		return
	}
	q, err := parseTraceQuery(r.URL.Query())
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), policyTimeout)
	defer cancel()
	out, err := s.p.Policy.PolicyTrace(ctx, q.src, q.dst, q.proto, q.port)
	if err != nil {
		fail(w, err)
		return
	}
	out.Protocol, out.Port = q.protocol, q.port
	writeJSON(w, http.StatusOK, out)
}

// endpointPolicy is endpoint id's policy, nil without an engine or
// while the engine does not know the endpoint.
func (s *Server) endpointPolicy(ctx context.Context, id uint16) (*models.EndpointPolicy, error) {
	if s.p.Policy == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, policyTimeout)
	defer cancel()
	pol, err := s.p.Policy.EndpointPolicy(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("endpoint %d: policy: %w", id, err)
	}
	return pol, nil
}

// traceQuery is GET /v1/policy/trace's query, validated.
type traceQuery struct {
	src, dst string
	protocol string
	proto    uint8
	port     uint16
}

var traceParams = []string{"src", "dst", "dport", "protocol"}

// parseTraceQuery checks the whole query and names every bad parameter.
func parseTraceQuery(v url.Values) (traceQuery, error) {
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(v)) {
		switch {
		case !slices.Contains(traceParams, k):
			errs = append(errs, fmt.Sprintf("%s: unknown parameter (known: %s)", k, strings.Join(traceParams, ", ")))
		case len(v[k]) > 1:
			errs = append(errs, fmt.Sprintf("%s: given %d times", k, len(v[k])))
		}
	}
	q := traceQuery{src: strings.TrimSpace(v.Get("src")), dst: strings.TrimSpace(v.Get("dst")),
		protocol: strings.ToLower(cmp.Or(v.Get("protocol"), "tcp"))}
	for _, p := range []struct{ name, val string }{{"src", q.src}, {"dst", q.dst}} {
		if p.val == "" {
			errs = append(errs, p.name+": required: an identity, a pod namespace/name, or labels")
		}
	}
	proto, known := models.TraceProtocols[q.protocol]
	if !known {
		errs = append(errs, fmt.Sprintf("protocol: %q is not tcp, udp, sctp or icmp", v.Get("protocol")))
	}
	q.proto = proto
	port, err := models.ParseTracePort(proto, v.Get("dport"))
	if err != nil {
		errs = append(errs, "dport: "+err.Error())
	}
	q.port = port
	if len(errs) > 0 {
		return traceQuery{}, invalid(errors.New(strings.Join(errs, "; ")))
	}
	return q, nil
}
