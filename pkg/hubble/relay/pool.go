// Package relay is hubble-relay: it learns the cluster's Hubble servers
// from a Peer service, keeps a connection to each, and answers Hubble's
// Observer API for all of them at once, flows merged in time order.
package relay

import (
	"context"
	"crypto/tls"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/cilium/api/v1/observer"
	"github.com/cilium/cilium/api/v1/peer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// HealthServiceName is the name under which Hubble servers and relays
// tell the gRPC health service (grpc.health.v1) that the Observer
// serves: Cilium's, which `hubble status` asks about.
const HealthServiceName = "hubble.server.Observer"

// Options configure the relay's side towards the nodes.
type Options struct {
	// PeerTarget is the Peer service: unix:///path or host:port.
	PeerTarget string
	// PeerServerName is the name the Peer service's certificate must
	// carry when TLS is on.
	PeerServerName string
	// TLS is the client side of mutual TLS towards the Peer service and
	// the nodes (certificate and the CAs that sign the servers'); nil
	// dials in plaintext.
	TLS *tls.Config
	// DialTimeout bounds the wait for a node's connection in a request.
	DialTimeout time.Duration
	// RetryTimeout is the wait before the Peer service is asked again
	// after its stream broke.
	RetryTimeout time.Duration
}

// node is one Hubble server the Peer service told of.
type node struct {
	name       string
	address    string
	serverName string // the certificate's name; empty without TLS
	conn       *grpc.ClientConn
}

func (n *node) client() observer.ObserverClient { return observer.NewObserverClient(n.conn) }

// Pool holds a connection to every node the Peer service lists.
type Pool struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	nodes map[string]*node
	// peerUp: the Peer service's stream is open.
	peerUp bool
}

// NewPool returns an empty pool; Run fills it.
func NewPool(opts Options, log *slog.Logger) *Pool {
	return &Pool{opts: opts, log: log, nodes: map[string]*node{}}
}

// Keepalive finds a node that stopped answering (frozen, or gone with
// its connection left open): a stream of it ends instead of waiting for
// ever. The nodes' servers permit pings this often (KeepaliveMinTime).
const (
	keepaliveTime    = 5 * time.Second
	keepaliveTimeout = 5 * time.Second
	// KeepaliveMinTime is the ping interval a Hubble server must permit.
	KeepaliveMinTime = 4 * time.Second
)

// dialOptions are the credentials towards a server whose certificate
// names serverName, and the keepalive.
func (p *Pool) dialOptions(serverName string) []grpc.DialOption {
	ka := grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true})
	if p.opts.TLS == nil {
		return []grpc.DialOption{ka, grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cfg := p.opts.TLS.Clone()
	cfg.ServerName = serverName
	return []grpc.DialOption{ka, grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
}

// target makes an address gRPC's: host:port is dialled as it is, without
// a resolver that would look it up elsewhere.
func target(addr string) string {
	if strings.Contains(addr, "://") {
		return addr
	}
	return "passthrough:///" + addr
}

// Run follows the Peer service until ctx ends, reconnecting after
// RetryTimeout when its stream breaks; the nodes it listed stay in the
// pool meanwhile. It closes every connection when it returns.
func (p *Pool) Run(ctx context.Context) {
	defer p.closeAll()
	for {
		err := p.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("peer service", "target", p.opts.PeerTarget, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.opts.RetryTimeout):
		}
	}
}

func (p *Pool) follow(ctx context.Context) error {
	opts := p.dialOptions(p.opts.PeerServerName)
	if strings.HasPrefix(p.opts.PeerTarget, "unix://") {
		// A node's own socket: its file permissions guard it, and the
		// agent serves it in plaintext.
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	conn, err := grpc.NewClient(target(p.opts.PeerTarget), opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := peer.NewPeerClient(conn).Notify(ctx, &peer.NotifyRequest{})
	if err != nil {
		return err
	}
	defer p.setPeerUp(false)
	for {
		cn, err := stream.Recv()
		if err != nil {
			return err
		}
		p.setPeerUp(true)
		p.apply(cn)
	}
}

func (p *Pool) setPeerUp(up bool) {
	p.mu.Lock()
	p.peerUp = up
	p.mu.Unlock()
}

// Serving says whether the relay can answer, as Cilium's relay tells its
// health service: the Peer service is followed and at least one node's
// connection is up. It waits for nothing.
func (p *Pool) Serving() bool {
	p.mu.Lock()
	up := p.peerUp
	p.mu.Unlock()
	if !up {
		return false
	}
	for _, n := range p.list() {
		if n.conn.GetState() == connectivity.Ready {
			return true
		}
	}
	return false
}

// apply takes one change of the Peer service.
func (p *Pool) apply(cn *peer.ChangeNotification) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.nodes[cn.GetName()]
	if cn.GetType() == peer.ChangeNotificationType_PEER_DELETED {
		if old != nil {
			old.conn.Close()
			delete(p.nodes, cn.GetName())
			p.log.Info("node gone", "node", cn.GetName())
		}
		return
	}
	serverName := ""
	if p.opts.TLS != nil {
		serverName = cn.GetTls().GetServerName()
	}
	if old != nil && old.address == cn.GetAddress() && old.serverName == serverName {
		return
	}
	conn, err := grpc.NewClient(target(cn.GetAddress()), p.dialOptions(serverName)...)
	if err != nil {
		p.log.Warn("node's address", "node", cn.GetName(), "address", cn.GetAddress(), "error", err)
		return
	}
	if old != nil {
		old.conn.Close()
	}
	conn.Connect()
	p.nodes[cn.GetName()] = &node{name: cn.GetName(), address: cn.GetAddress(), serverName: serverName, conn: conn}
	p.log.Info("node", "node", cn.GetName(), "address", cn.GetAddress(), "tls", serverName != "")
}

func (p *Pool) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, n := range p.nodes {
		n.conn.Close()
		delete(p.nodes, name)
	}
}

// list is the pool's nodes by name.
func (p *Pool) list() []*node {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*node, 0, len(p.nodes))
	for _, name := range slices.Sorted(maps.Keys(p.nodes)) {
		out = append(out, p.nodes[name])
	}
	return out
}

// ready waits up to DialTimeout for n's connection. A connection that
// failed last time is not waited for: its node is unavailable until
// gRPC's backoff succeeds in the background.
func (p *Pool) ready(ctx context.Context, n *node) bool {
	ctx, cancel := context.WithTimeout(ctx, p.opts.DialTimeout)
	defer cancel()
	for {
		s := n.conn.GetState()
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		case connectivity.Idle:
			n.conn.Connect()
		}
		if !n.conn.WaitForStateChange(ctx, s) {
			return false
		}
	}
}

// split sorts the nodes into those that answer and those that do not.
func (p *Pool) split(ctx context.Context) (connected, unavailable []*node) {
	nodes := p.list()
	ok := make([]bool, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { ok[i] = p.ready(ctx, n) })
	}
	wg.Wait()
	for i, n := range nodes {
		if ok[i] {
			connected = append(connected, n)
		} else {
			unavailable = append(unavailable, n)
		}
	}
	return connected, unavailable
}

func names(nodes []*node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.name
	}
	return out
}

// ServerName is the name a node's Hubble server certificate carries,
// Cilium's: <node>.<cluster>.hubble-grpc.cilium.io, dots in either name
// made dashes so that every node's name is one label under the cluster's
// (a wildcard certificate covers them all).
func ServerName(node, cluster string) string {
	if cluster == "" {
		cluster = "default"
	}
	return strings.ReplaceAll(node, ".", "-") + "." + strings.ReplaceAll(cluster, ".", "-") + ".hubble-grpc.cilium.io"
}
