package etcd

import "net/netip"

// addrPortValue is a pflag.Value for netip.AddrPort.
type addrPortValue struct{ p *netip.AddrPort }

func (v addrPortValue) String() string {
	if v.p == nil || !v.p.IsValid() {
		return ""
	}
	return v.p.String()
}

func (v addrPortValue) Set(s string) error {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return err
	}
	*v.p = ap
	return nil
}

func (v addrPortValue) Type() string { return "address:port" }
