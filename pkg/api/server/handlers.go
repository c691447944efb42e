package server

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/hive/cell"
	"github.com/spf13/pflag"

	apiv1 "github.com/cilium-go/cilium/api/v1"
	"github.com/cilium-go/cilium/pkg/api/ciliumapi"
	"github.com/cilium-go/cilium/pkg/api/models"
	"github.com/cilium-go/cilium/pkg/endpoint"
	"github.com/cilium-go/cilium/pkg/identity"
)

func (s *Server) getHealthz(w http.ResponseWriter, _ *http.Request) {
	out := models.Health{OK: true, Modules: []models.ModuleHealth{}}
	for _, st := range s.p.Health.All() {
		if st.Level == cell.StatusDegraded {
			out.OK = false
		}
		out.Modules = append(out.Modules, models.ModuleHealth{Module: st.Scope, Level: string(st.Level),
			Message: st.Message, Error: st.Error, Since: st.Since})
	}
	status := http.StatusOK
	if !out.OK {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, out)
}

// Options changeable at run time, with their current values.
func (s *Server) options() map[string]string {
	opts := map[string]string{}
	if s.p.LogLevel != nil {
		opts["debug"] = strconv.FormatBool(s.p.LogLevel.Level() <= slog.LevelDebug)
	}
	return opts
}

func (s *Server) config() models.Config {
	c := models.Config{Flags: map[string]string{}, Options: s.options()}
	if s.p.Node != nil {
		c.PodMTU = s.p.Node.PodMTU()
		c.PodDevice = s.p.Node.PodDevice()
	}
	s.p.Flags.VisitAll(func(f *pflag.Flag) { c.Flags[f.Name] = f.Value.String() })
	return c
}

func (s *Server) getConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.config())
}

func (s *Server) patchConfig(w http.ResponseWriter, r *http.Request) {
	var p models.ConfigPatch
	if err := Decode(r.Body, &p); err != nil {
		fail(w, err)
		return
	}
	if p.Options == nil {
		fail(w, invalid(errors.New("options: required")))
		return
	}
	known := s.options()
	// Validate everything before changing anything.
	for _, k := range slices.Sorted(maps.Keys(p.Options)) {
		if _, ok := known[k]; !ok {
			fail(w, invalid(fmt.Errorf("options.%s: unknown option (known: %s)", k,
				strings.Join(slices.Sorted(maps.Keys(known)), ", "))))
			return
		}
		if _, err := strconv.ParseBool(p.Options[k]); err != nil {
			fail(w, invalid(fmt.Errorf("options.%s: %q is not true or false", k, p.Options[k])))
			return
		}
	}
	if v, ok := p.Options["debug"]; ok {
		debug, _ := strconv.ParseBool(v)
		level := slog.LevelInfo
		if debug {
			level = slog.LevelDebug
		}
		s.p.LogLevel.Set(level)
		s.p.Log.Info("option changed", "debug", debug)
	}
	writeJSON(w, http.StatusOK, s.config())
}

func (s *Server) getIPAM(w http.ResponseWriter, _ *http.Request) {
	out := []models.IPAMAllocation{}
	for _, a := range s.p.IPAM.List() {
		out = append(out, models.IPAMAllocation{IP: a.IP.String(), Owner: a.Owner})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) postIPAM(w http.ResponseWriter, r *http.Request) {
	var req models.IPAMRequest
	if err := Decode(r.Body, &req); err != nil {
		fail(w, err)
		return
	}
	if err := req.Validate(); err != nil {
		fail(w, invalid(err))
		return
	}
	res, err := s.p.IPAM.Allocate(req.Owner)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, models.IPAMResponse{Address: res.IP.String(),
		Gateway: res.Gateway.String(), PodCIDR: res.PodCIDR.String()})
}

func (s *Server) deleteIPAM(w http.ResponseWriter, r *http.Request) {
	ip, err := netip.ParseAddr(r.PathValue("ip"))
	if err != nil {
		fail(w, invalid(fmt.Errorf("ip: %q is not an address", r.PathValue("ip"))))
		return
	}
	if err := s.p.IPAM.Release(ip); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) listEndpoints(w http.ResponseWriter, _ *http.Request) {
	out := []models.Endpoint{}
	for _, e := range s.p.Endpoints.List() {
		out = append(out, s.toModel(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	e, err := s.p.Endpoints.Get(r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	m := s.toModel(e)
	if m.Policy, err = s.endpointPolicy(r.Context(), e.ID); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// containerID is the container named by a "container-id:<id>" path.
func containerID(r *http.Request) (string, error) {
	id, ok := strings.CutPrefix(r.PathValue("id"), models.ContainerIDPrefix)
	if !ok || id == "" {
		return "", invalid(fmt.Errorf("id: %q is not %s<container id>", r.PathValue("id"), models.ContainerIDPrefix))
	}
	return id, nil
}

func (s *Server) putEndpoint(w http.ResponseWriter, r *http.Request) {
	cid, err := containerID(r)
	if err != nil {
		fail(w, err)
		return
	}
	var req models.EndpointRequest
	if err := Decode(r.Body, &req); err != nil {
		fail(w, err)
		return
	}
	if req.ContainerID == "" {
		req.ContainerID = cid
	}
	if req.ContainerID != cid {
		fail(w, invalid(fmt.Errorf("containerID: %q differs from the path's %q", req.ContainerID, cid)))
		return
	}
	spec, err := toSpec(req)
	if err != nil {
		fail(w, invalid(err))
		return
	}
	if err := s.admit(spec); err != nil {
		fail(w, invalid(err))
		return
	}
	e, created, err := s.p.Endpoints.Create(r.Context(), spec)
	if err != nil {
		fail(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, s.toModel(e))
}

// admit lets an endpoint through only with an address that IPAM gave its
// container and a device that is a pod's: the socket's callers could
// otherwise attach pod programs and routes to the node's uplink, or take
// another pod's address. It runs before anything changes.
func (s *Server) admit(spec endpoint.Spec) error {
	owner, ok := s.p.IPAM.Owner(spec.IPv4)
	switch {
	case !ok:
		return fmt.Errorf("ipv4: %s is not allocated; POST /v1/ipam first", spec.IPv4)
	case owner != spec.ContainerID:
		return fmt.Errorf("ipv4: %s is allocated to another container", spec.IPv4)
	}
	if s.p.PodDevices == nil {
		return errors.New("hostIfName: no way to check pod devices")
	}
	if err := s.p.PodDevices.CheckPodDevice(spec.HostIfName, spec.HostIfindex); err != nil {
		return fmt.Errorf("hostIfName: %q: %w", spec.HostIfName, err)
	}
	return nil
}

func (s *Server) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	cid, err := containerID(r)
	if err != nil {
		fail(w, err)
		return
	}
	e, err := s.p.Endpoints.Delete(r.Context(), cid)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.toModel(e))
}

// toSpec converts a request into an endpoint spec; endpoint.Spec.Validate holds the
// rules, so the API and a restore from disk check the same things.
func toSpec(r models.EndpointRequest) (endpoint.Spec, error) {
	ip, err := netip.ParseAddr(r.IPv4)
	if err != nil || !ip.Is4() {
		return endpoint.Spec{}, fmt.Errorf("ipv4: %q is not an IPv4 address", r.IPv4)
	}
	s := endpoint.Spec{ContainerID: r.ContainerID, PodName: r.PodName, PodNamespace: r.PodNamespace,
		IPv4: ip, MAC: r.MAC, IfName: r.IfName, HostIfName: r.HostIfName, HostIfindex: r.HostIfindex,
		NetNSPath: r.NetNSPath}
	return s, s.Validate()
}

func (s *Server) toModel(e endpoint.Endpoint) models.Endpoint {
	return models.Endpoint{ID: e.ID, ContainerID: e.ContainerID, PodName: e.PodName, PodNamespace: e.PodNamespace,
		IPv4: e.IPv4.String(), MAC: e.MAC, IfName: e.IfName, HostIfName: e.HostIfName, HostIfindex: e.HostIfindex,
		NetNSPath: e.NetNSPath, Identity: e.Identity, Labels: s.labels(e), State: "ready", Created: e.Created}
}

// labels are the security labels of e's identity; none where they are not
// known here (no Kubernetes, or the identity is still being allocated).
func (s *Server) labels(e endpoint.Endpoint) []string {
	if r, ok := identity.ReservedIdentity(e.Identity); ok {
		return r.Labels.Strings()
	}
	if s.p.PodIdentities != nil && e.PodName != "" {
		if id, ok := s.p.PodIdentities.Identity(endpoint.Pod{Namespace: e.PodNamespace, Name: e.PodName}); ok && id.ID == e.Identity {
			return id.Labels.Strings()
		}
	}
	return []string{}
}

func (s *Server) getIdentity(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.identities())
}

// getIdentityByID is Cilium's GET /v1/identity/{id}: one identity in
// Cilium's Identity model, reserved or used by an endpoint of this node.
func (s *Server) getIdentityByID(w http.ResponseWriter, r *http.Request) {
	num, err := strconv.ParseUint(r.PathValue("id"), 10, 32)
	if err != nil {
		fail(w, invalid(fmt.Errorf("identity %q: not a number from 0 to 4294967295", r.PathValue("id"))))
		return
	}
	for _, id := range s.identities() {
		if uint64(id.ID) == num {
			writeJSON(w, http.StatusOK, ciliumapi.Identity(id))
			return
		}
	}
	writeError(w, http.StatusNotFound, fmt.Errorf("identity %d: not reserved and not used by an endpoint of this node", num))
}

// identities are the reserved identities and those of the node's
// endpoints, by number.
func (s *Server) identities() []models.Identity {
	byID := map[identity.NumericIdentity]*models.Identity{}
	for id := identity.Host; id <= identity.WorldIPv6; id++ {
		if r, ok := identity.ReservedIdentity(id); ok {
			byID[id] = &models.Identity{ID: id, Labels: r.Labels.Strings()}
		}
	}
	for _, e := range s.p.Endpoints.List() {
		if byID[e.Identity] == nil {
			byID[e.Identity] = &models.Identity{ID: e.Identity, Labels: s.labels(e)}
		}
		byID[e.Identity].Endpoints++
	}
	out := []models.Identity{}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		out = append(out, *byID[id])
	}
	return out
}

func (s *Server) getMap(w http.ResponseWriter, _ *http.Request) {
	if s.p.Maps == nil {
		writeJSON(w, http.StatusOK, []models.BPFMap{})
		return
	}
	out, err := s.p.Maps.ListMaps()
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(apiv1.OpenAPI)
}
