package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cilium-go/cilium/lab/internal/netns"
	"github.com/cilium-go/cilium/lab/internal/plan"
)

// install/kubernetes's hubble-ui: its Deployment, and its Service and
// that Service's port, named as Cilium's chart names them.
const (
	uiDeployment = "hubble-ui"
	uiService    = "hubble-ui"
	uiPort       = "http"
)

// UIURLFile is where the supervisor writes the URL it serves Hubble UI
// on, on the host's loopback.
func UIURLFile(stateDir string) string { return filepath.Join(stateDir, "hubble-ui") }

// UIURL is the URL of the lab's Hubble UI on the host, as the supervisor
// wrote it.
func UIURL(stateDir string) (string, error) {
	b, err := os.ReadFile(UIURLFile(stateDir))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// uiURL is the URL of the plan's UI port.
func uiURL(p plan.Plan) string {
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(p.HostUIPort)) + "/"
}

// printUI says where the host reaches Hubble UI, and why it may not answer.
func printUI(w io.Writer, p plan.Plan) {
	if p.HostUIPort == 0 {
		return
	}
	url, err := UIURL(p.StateDir)
	if err != nil {
		fmt.Fprintf(w, "  Hubble UI: not forwarded (%v): see %s\n", err, filepath.Join(layout{p.StateDir}.logs(), "supervisor.log"))
		return
	}
	fmt.Fprintf(w, "  Hubble UI: %s\n", url)
	if url != uiURL(p) {
		fmt.Fprintf(w, "    (127.0.0.1:%d was taken, by `cilium hubble ui` perhaps: --ui-port picks another)\n", p.HostUIPort)
	}
}

// forwardUI serves the hubble-ui Service on the host's loopback, as
// `cilium hubble ui` port-forwards it, with nothing added to the host's
// network: each connection is relayed from the control plane's network
// namespace, which routes to every node's pods (routeNodes), to a ready
// endpoint of the Service. With none ready (hubble-ui not built, not
// started yet) a connection is closed, and nothing else waits on the UI.
// A taken port (by `cilium hubble ui`, say) is no reason to fail the lab:
// it serves from a free port instead, and says so in its log. The URL it
// serves on goes to UIURLFile.
func forwardUI(ctx context.Context, p plan.Plan, cs kubernetes.Interface, log *slog.Logger) error {
	log = log.With("forwarder", "hubble-ui")
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.HostUIPort)))
	if err != nil {
		log.Warn("the UI's port is taken: serving on a free one", "error", err)
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return fmt.Errorf("hubble-ui forwarder: %w", err)
		}
	}
	url := "http://" + ln.Addr().String() + "/"
	if err := os.WriteFile(UIURLFile(p.StateDir), []byte(url+"\n"), 0o644); err != nil {
		ln.Close()
		return err
	}
	dial := netns.Dialer(p.ControlPlaneNS)
	go forward(ctx, ln, func(ctx context.Context) (net.Conn, error) {
		c, err := dialService(ctx, cs, dial, ciliumNamespace, uiService, uiPort)
		if err != nil {
			log.Warn("connection not forwarded", "error", err)
		}
		return c, err
	}, log)
	log.Info("serving Hubble UI", "url", url)
	return nil
}

// dialService connects to the first ready endpoint of Service ns/name
// that answers, on the Service's port called port.
func dialService(ctx context.Context, cs kubernetes.Interface, dial func(context.Context, string, string) (net.Conn, error),
	ns, name, port string,
) (net.Conn, error) {
	list, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return nil, fmt.Errorf("service %s/%s: %w", ns, name, err)
	}
	addrs := readyEndpoints(list.Items, port)
	if len(addrs) == 0 {
		return nil, fmt.Errorf("service %s/%s has no ready endpoint on port %s", ns, name, port)
	}
	var errs []error
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, err := dial(dctx, "tcp", a)
		cancel()
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("service %s/%s: %w", ns, name, errors.Join(errs...))
}

// readyEndpoints are the IPv4 addresses, with the port called port, of
// the endpoints the slices hold that are ready (no condition counts as
// ready, as the API says).
func readyEndpoints(slices []discoveryv1.EndpointSlice, port string) []string {
	var out []string
	for _, s := range slices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		num := int32(-1)
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == port && p.Port != nil {
				num = *p.Port
			}
		}
		if num < 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				out = append(out, net.JoinHostPort(a, strconv.Itoa(int(num))))
			}
		}
	}
	return out
}
