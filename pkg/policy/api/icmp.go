package api

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// icmpTypes are the ICMP type names of each family (RFC 792 and the
// IANA registries), the names Cilium accepts.
var icmpTypes = map[ICMPFamily]map[string]uint8{
	ICMPFamilyIPv4: {
		"EchoReply":              0,
		"DestinationUnreachable": 3,
		"Redirect":               5,
		"Echo":                   8,
		"EchoRequest":            8,
		"RouterAdvertisement":    9,
		"RouterSelection":        10,
		"TimeExceeded":           11,
		"ParameterProblem":       12,
		"Timestamp":              13,
		"TimestampReply":         14,
		"Photuris":               40,
		"ExtendedEchoRequest":    42,
		"ExtendedEchoReply":      43,
	},
	ICMPFamilyIPv6: {
		"DestinationUnreachable":                 1,
		"PacketTooBig":                           2,
		"TimeExceeded":                           3,
		"ParameterProblem":                       4,
		"EchoRequest":                            128,
		"EchoReply":                              129,
		"MulticastListenerQuery":                 130,
		"MulticastListenerReport":                131,
		"MulticastListenerDone":                  132,
		"RouterSolicitation":                     133,
		"RouterAdvertisement":                    134,
		"NeighborSolicitation":                   135,
		"NeighborAdvertisement":                  136,
		"RedirectMessage":                        137,
		"RouterRenumbering":                      138,
		"ICMPNodeInformationQuery":               139,
		"ICMPNodeInformationResponse":            140,
		"InverseNeighborDiscoverySolicitation":   141,
		"InverseNeighborDiscoveryAdvertisement":  142,
		"HomeAgentAddressDiscoveryRequest":       144,
		"HomeAgentAddressDiscoveryReply":         145,
		"MobilePrefixSolicitation":               146,
		"MobilePrefixAdvertisement":              147,
		"DuplicateAddressRequestCodeSuffix":      157,
		"DuplicateAddressConfirmationCodeSuffix": 158,
		"ExtendedEchoRequest":                    160,
		"ExtendedEchoReply":                      161,
	},
}

// ICMPFamilyOrDefault is the field's family, IPv4 when none is given.
func (f *ICMPField) ICMPFamilyOrDefault() ICMPFamily {
	if f.Family == "" {
		return ICMPFamilyIPv4
	}
	return f.Family
}

// TypeNumber is the field's ICMP type as a number, names looked up in the
// field's family.
func (f *ICMPField) TypeNumber() (uint8, error) {
	fam := f.ICMPFamilyOrDefault()
	names, ok := icmpTypes[fam]
	if !ok {
		return 0, fmt.Errorf("family must be IPv4 or IPv6")
	}
	if f.Type.Type == intstr.Int {
		if f.Type.IntVal < 0 || f.Type.IntVal > 255 {
			return 0, fmt.Errorf("must be a number from 0 to 255 or an %s type name", icmpName(fam))
		}
		return uint8(f.Type.IntVal), nil
	}
	s := f.Type.StrVal
	if n, err := strconv.ParseUint(s, 10, 8); err == nil {
		return uint8(n), nil
	}
	if n, ok := names[s]; ok {
		return n, nil
	}
	return 0, fmt.Errorf("must be a number from 0 to 255 or an %s type name", icmpName(fam))
}

func icmpName(fam ICMPFamily) string {
	if fam == ICMPFamilyIPv6 {
		return "ICMPv6"
	}
	return "ICMPv4"
}
