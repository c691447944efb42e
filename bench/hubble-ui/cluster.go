package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/cilium/cilium/api/v1/observer"
	"github.com/cilium/cilium/api/v1/peer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/cilium-go/cilium/pkg/hubble/container"
	hubbleobserver "github.com/cilium-go/cilium/pkg/hubble/observer"
	"github.com/cilium-go/cilium/pkg/hubble/relay"
	"github.com/cilium-go/cilium/pkg/hubble/ui"
)

// node is one agent's Hubble server: the agent's own Observer over a
// ring, as cilium-agent serves it, on loopback.
type node struct {
	name string
	ring *container.Ring
	addr string
}

// staticPeers tells the relay of the nodes, as the agents' Peer service
// does, then waits.
type staticPeers struct {
	peer.UnimplementedPeerServer
	nodes []*node
}

func (s *staticPeers) Notify(_ *peer.NotifyRequest, stream peer.Peer_NotifyServer) error {
	for _, n := range s.nodes {
		if err := stream.Send(&peer.ChangeNotification{Name: n.name, Address: n.addr, Type: peer.ChangeNotificationType_PEER_ADDED}); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

// pipeline is the path the flows take to the page: the nodes' Observers,
// hubble-relay merging them, and hubble-ui's backend, each the real code
// over gRPC and HTTP on loopback.
type pipeline struct {
	nodes []*node
	url   string
	stop  func()
}

// listen serves on a loopback port of its own (the root network
// namespace's loopback holds no address of ours).
func listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func startPipeline(ctx context.Context, names []string, namespace string, log *slog.Logger) (*pipeline, error) {
	p := &pipeline{}
	var stops []func()
	p.stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	fail := func(err error) (*pipeline, error) {
		p.stop()
		return nil, err
	}
	var first *grpc.Server
	for _, name := range names {
		// The largest ring: at 10,000 flows/s the relay must not fall a
		// ring behind.
		ring, err := container.NewRing(1<<16 - 1)
		if err != nil {
			return fail(err)
		}
		ln, err := listen()
		if err != nil {
			return fail(err)
		}
		// The relay's keepalive pings, as the agents permit them.
		srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: relay.KeepaliveMinTime, PermitWithoutStream: true}))
		observer.RegisterObserverServer(srv, hubbleobserver.New(ring, name, "bench"))
		if first == nil {
			first = srv
		}
		n := &node{name: name, ring: ring, addr: ln.Addr().String()}
		p.nodes = append(p.nodes, n)
		stops = append(stops, srv.Stop)
		defer func() { go srv.Serve(ln) }()
	}
	peer.RegisterPeerServer(first, &staticPeers{nodes: p.nodes})

	rctx, cancel := context.WithCancel(ctx)
	stops = append(stops, cancel)
	pool := relay.NewPool(relay.Options{PeerTarget: p.nodes[0].addr, DialTimeout: dialTimeout, RetryTimeout: dialTimeout}, log)
	go pool.Run(rctx)
	rln, err := listen()
	if err != nil {
		return fail(err)
	}
	rsrv := grpc.NewServer()
	observer.RegisterObserverServer(rsrv, relay.NewServer(pool, "bench", 100, sortDrain))
	go rsrv.Serve(rln)
	stops = append(stops, rsrv.Stop)

	conn, err := grpc.NewClient(rln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fail(err)
	}
	stops = append(stops, func() { conn.Close() })
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName(namespace)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{{Version: "v1", Resource: "namespaces"}: "NamespaceList"}, ns)
	s := &ui.Server{Relay: observer.NewObserverClient(conn), Cluster: ui.NewCluster(dyn), Log: log}
	hln, err := listen()
	if err != nil {
		return fail(err)
	}
	hsrv := &http.Server{Handler: s.Handler(), BaseContext: func(net.Listener) context.Context { return rctx }}
	go hsrv.Serve(hln)
	stops = append(stops, func() { hsrv.Close() })
	p.url = fmt.Sprintf("http://%s/?namespace=%s", hln.Addr(), namespace)
	return p, nil
}
