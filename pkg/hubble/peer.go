package hubble

import (
	"github.com/cilium/statedb"

	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/cilium/cilium/api/v1/peer"

	"github.com/cilium-go/cilium/pkg/hubble/relay"
	"github.com/cilium-go/cilium/pkg/node"
)

// NodeSource is the cluster's nodes as the agent knows them, with the
// channels that close when they change; *node.Cluster is one.
type NodeSource interface {
	Watch() ([]node.Node, *statedb.WatchSet)
}

// peerServer is Hubble's Peer service: it tells a relay where every
// node's Hubble server listens, and each change after.
type peerServer struct {
	peer.UnimplementedPeerServer
	nodes NodeSource
	port  int
	// tls says the servers speak TLS: a notification then names the
	// node's certificate (relay.ServerName).
	tls bool
	// cluster is the cluster's name, part of that certificate name.
	cluster string
}

// Notify implements peer.PeerServer: every node, then the changes, until
// the client goes.
func (s *peerServer) Notify(_ *peer.NotifyRequest, stream peer.Peer_NotifyServer) error {
	known := map[string]*peer.ChangeNotification{}
	for {
		now := map[string]*peer.ChangeNotification{}
		nodes, changed := s.nodes.Watch()
		for _, n := range nodes {
			if n.IPv4.IsValid() {
				now[n.Name] = s.notification(n)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(now)) {
			cn, old := now[name], known[name]
			switch {
			case old == nil:
				cn.Type = peer.ChangeNotificationType_PEER_ADDED
			case old.GetAddress() != cn.GetAddress():
				cn.Type = peer.ChangeNotificationType_PEER_UPDATED
			default:
				continue
			}
			if err := stream.Send(cn); err != nil {
				return err
			}
		}
		for _, name := range slices.Sorted(maps.Keys(known)) {
			if _, ok := now[name]; !ok {
				gone := &peer.ChangeNotification{Name: name, Address: known[name].GetAddress(), Type: peer.ChangeNotificationType_PEER_DELETED}
				if err := stream.Send(gone); err != nil {
					return err
				}
			}
		}
		known = now
		if _, err := changed.Wait(stream.Context(), 0); err != nil {
			return nil // the client went
		}
	}
}

func (s *peerServer) notification(n node.Node) *peer.ChangeNotification {
	cn := &peer.ChangeNotification{Name: n.Name, Address: net.JoinHostPort(n.IPv4.String(), strconv.Itoa(s.port))}
	if s.tls {
		cn.Tls = &peer.TLS{ServerName: relay.ServerName(n.Name, s.cluster)}
	}
	return cn
}
