package main

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cilium-go/cilium/internal/datapath"
	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// bpfConnection is one conntrack entry.
type bpfConnection struct {
	Protocol string `json:"protocol"`
	Src      string `json:"src"`
	SrcPort  uint16 `json:"srcPort"`
	Dst      string `json:"dst"`
	DstPort  uint16 `json:"dstPort"`
	// ExpiresIn is in seconds; 0 for an entry that expired and waits
	// for garbage collection.
	ExpiresIn   int64                    `json:"expiresIn"`
	Packets     uint64                   `json:"packets"`
	Bytes       uint64                   `json:"bytes"`
	SrcIdentity identity.NumericIdentity `json:"srcIdentity"`
	DstIdentity identity.NumericIdentity `json:"dstIdentity"`
	Tunnel      string                   `json:"tunnel,omitempty"`
	SeenReply   bool                     `json:"seenReply"`
	Closing     bool                     `json:"closing"`
	Masqueraded bool                     `json:"masqueraded"`
}

func (o *options) bpfConntrack(m *datapath.Maps) error {
	conns, err := m.Connections()
	if err != nil {
		return err
	}
	now, err := datapath.Monotonic()
	if err != nil {
		return err
	}
	out := connectionViews(conns, now)
	return o.render(out, func(w *tabwriter.Writer) {
		row(w, "PROTO", "SOURCE", "DESTINATION", "EXPIRES", "PACKETS", "BYTES", "IDENTITIES", "FLAGS")
		for _, c := range out {
			row(w, c.Protocol, fmt.Sprintf("%s:%d", c.Src, c.SrcPort), fmt.Sprintf("%s:%d", c.Dst, c.DstPort),
				fmt.Sprintf("%ds", c.ExpiresIn), c.Packets, c.Bytes,
				fmt.Sprintf("%d->%d", c.SrcIdentity, c.DstIdentity), ctFlags(c))
		}
	})
}

// connectionViews sorts the table by source, destination and ports and
// turns expiry on the monotonic clock into seconds from now.
func connectionViews(conns []datapath.Connection, now time.Duration) []bpfConnection {
	slices.SortFunc(conns, func(a, b datapath.Connection) int {
		return cmp.Or(a.Src.Compare(b.Src), a.Dst.Compare(b.Dst), cmp.Compare(a.SrcPort, b.SrcPort),
			cmp.Compare(a.DstPort, b.DstPort), cmp.Compare(a.Protocol, b.Protocol))
	})
	out := make([]bpfConnection, 0, len(conns))
	for _, c := range conns {
		v := bpfConnection{Protocol: spec.ProtoString(c.Protocol), Src: c.Src.String(), SrcPort: c.SrcPort,
			Dst: c.Dst.String(), DstPort: c.DstPort, ExpiresIn: int64(max(c.Expires-now, 0) / time.Second),
			Packets: c.Packets, Bytes: c.Bytes, SrcIdentity: c.SrcIdentity, DstIdentity: c.DstIdentity,
			Tunnel: addrOrEmpty(c.Tunnel), SeenReply: c.SeenReply, Closing: c.Closing, Masqueraded: c.Masqueraded}
		out = append(out, v)
	}
	return out
}

func addrOrEmpty(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

func ctFlags(c bpfConnection) string {
	var s []string
	if c.SeenReply {
		s = append(s, "reply")
	}
	if c.Closing {
		s = append(s, "closing")
	}
	if c.Masqueraded {
		s = append(s, "snat")
	}
	if c.Tunnel != "" {
		s = append(s, "tunnel="+c.Tunnel)
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}
