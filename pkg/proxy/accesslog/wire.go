package accesslog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cilium-go/cilium/internal/datapath/spec"
	"github.com/cilium-go/cilium/pkg/identity"
)

// On the socket a record is a frame: its length as a uvarint, then the
// record in protobuf's wire format, written and read here by hand (no
// reflection: the proxy writes two records per HTTP request, and JSON
// cost the proxy 4 µs and the agent 10 µs of each). Unknown fields are
// skipped, so either side may be a version ahead. The field numbers:
//
//	Record:     1 time (unix ns)  2 type  3 verdict  4 direction
//	            5 src  6 dst (netip.AddrPort's binary form)
//	            7 src identity  8 dst identity  9 src endpoint
//	            10 dst endpoint  11 protocol  12 latency (ns)
//	            13 dns (DNSRecord)  14 http (HTTPRecord)
//	DNSRecord:  1 query  2 qtype (repeated)  3 rcode
//	            4 ip (repeated, netip.Addr's binary form)  5 ttl
//	            6 cname (repeated)  7 rrtype (repeated)
//	HTTPRecord: 1 method  2 url  3 protocol  4 code
//	            5 header (repeated: 1 name, 2 value repeated)
//
// Strings go as the proxy saw them; the agent makes them valid UTF-8,
// as Hubble's protobufs must be (a pod chooses its headers' bytes).

// encoder writes records as frames, with buffers kept from one record
// to the next.
type encoder struct {
	msg, sub, hdr []byte
}

// appendFrame appends r's frame to b, unless r is over maxRecord, more
// than the agent takes (false).
func (e *encoder) appendFrame(b []byte, r *Record) ([]byte, bool) {
	m := e.msg[:0]
	if !r.Time.IsZero() {
		m = appendVarint(m, 1, uint64(r.Time.UnixNano()))
	}
	m = appendVarint(m, 2, uint64(r.Type))
	m = appendVarint(m, 3, uint64(r.Verdict))
	m = appendVarint(m, 4, uint64(r.Direction))
	m = appendAddrPort(m, 5, r.Src)
	m = appendAddrPort(m, 6, r.Dst)
	m = appendVarint(m, 7, uint64(r.SrcIdentity))
	m = appendVarint(m, 8, uint64(r.DstIdentity))
	m = appendVarint(m, 9, uint64(r.SrcEndpoint))
	m = appendVarint(m, 10, uint64(r.DstEndpoint))
	m = appendVarint(m, 11, uint64(r.Protocol))
	m = appendVarint(m, 12, uint64(r.Latency))
	if d := r.DNS; d != nil {
		s := appendString(e.sub[:0], 1, d.Query)
		s = appendStrings(s, 2, d.QTypes)
		s = appendVarint(s, 3, uint64(d.RCode))
		for _, ip := range d.IPs {
			s = protowire.AppendTag(s, 4, protowire.BytesType)
			s = protowire.AppendVarint(s, uint64(ip.BitLen()/8+len(ip.Zone())))
			s, _ = ip.AppendBinary(s)
		}
		s = appendVarint(s, 5, uint64(d.TTL))
		s = appendStrings(s, 6, d.CNAMEs)
		s = appendStrings(s, 7, d.RRTypes)
		e.sub = s
		m = protowire.AppendTag(m, 13, protowire.BytesType)
		m = protowire.AppendBytes(m, s)
	}
	if h := r.HTTP; h != nil {
		s := appendString(e.sub[:0], 1, h.Method)
		s = appendString(s, 2, h.URL)
		s = appendString(s, 3, h.Protocol)
		s = appendVarint(s, 4, uint64(h.Code))
		for name, values := range h.Headers {
			e.hdr = appendStrings(appendString(e.hdr[:0], 1, name), 2, values)
			s = protowire.AppendTag(s, 5, protowire.BytesType)
			s = protowire.AppendBytes(s, e.hdr)
		}
		e.sub = s
		m = protowire.AppendTag(m, 14, protowire.BytesType)
		m = protowire.AppendBytes(m, s)
	}
	e.msg = m
	if len(m) > maxRecord {
		return b, false
	}
	return protowire.AppendBytes(b, m), true
}

// appendVarint appends field num of value v; a zero is left out, as
// protobuf leaves a scalar of its default value out.
func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

// appendStrings appends each of ss as field num, empty ones too.
func appendStrings(b []byte, num protowire.Number, ss []string) []byte {
	for _, s := range ss {
		b = protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
	}
	return b
}

func appendAddrPort(b []byte, num protowire.Number, ap netip.AddrPort) []byte {
	if !ap.IsValid() {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(ap.Addr().BitLen()/8+len(ap.Addr().Zone())+2))
	b, _ = ap.AppendBinary(b)
	return b
}

// field is one field of a message: a varint's value or a length-
// delimited field's bytes, as its wire type says.
type field struct {
	num   protowire.Number
	typ   protowire.Type
	v     uint64
	bytes []byte
}

// fields calls f with each varint and length-delimited field of msg, in
// order, and skips fields of other wire types (none of ours has one).
func fields(msg []byte, f func(field) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		fd := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			fd.v, n = protowire.ConsumeVarint(msg)
		case protowire.BytesType:
			fd.bytes, n = protowire.ConsumeBytes(msg)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		msg = msg[n:]
		if typ != protowire.VarintType && typ != protowire.BytesType {
			continue
		}
		if err := f(fd); err != nil {
			return fmt.Errorf("field %d: %w", num, err)
		}
	}
	return nil
}

var errWireType = errors.New("of the wrong wire type")

// uint is f's value, at most limit.
func (f field) uint(limit uint64) (uint64, error) {
	switch {
	case f.typ != protowire.VarintType:
		return 0, errWireType
	case f.v > limit:
		return 0, fmt.Errorf("%d is over %d", f.v, limit)
	}
	return f.v, nil
}

// text is f's bytes as valid UTF-8: each run of bytes that is not
// becomes U+FFFD, as encoding/json and Hubble's protobufs would have it.
func (f field) text() (string, error) {
	if f.typ != protowire.BytesType {
		return "", errWireType
	}
	if utf8.Valid(f.bytes) {
		return string(f.bytes), nil
	}
	return strings.ToValidUTF8(string(f.bytes), "\uFFFD"), nil
}

// each calls fn with each field of f, a message.
func (f field) each(fn func(field) error) error {
	if f.typ != protowire.BytesType {
		return errWireType
	}
	return fields(f.bytes, fn)
}

func (f field) addrPort() (netip.AddrPort, error) {
	var ap netip.AddrPort
	if f.typ != protowire.BytesType {
		return ap, errWireType
	}
	return ap, ap.UnmarshalBinary(f.bytes)
}

// decode reads the record of a frame's message.
func decode(msg []byte) (Record, error) {
	var r Record
	err := fields(msg, func(f field) error {
		var v uint64
		var err error
		switch f.num {
		case 1:
			// 0 is the zero time's value too: left out.
			if v, err = f.uint(math.MaxInt64); v != 0 {
				r.Time = time.Unix(0, int64(v)).UTC()
			}
		case 2:
			v, err = f.uint(math.MaxUint8)
			r.Type = RecordType(v)
		case 3:
			v, err = f.uint(math.MaxUint8)
			r.Verdict = Verdict(v)
		case 4:
			v, err = f.uint(math.MaxUint8)
			r.Direction = spec.Direction(v)
		case 5:
			r.Src, err = f.addrPort()
		case 6:
			r.Dst, err = f.addrPort()
		case 7:
			v, err = f.uint(math.MaxUint32)
			r.SrcIdentity = identity.NumericIdentity(v)
		case 8:
			v, err = f.uint(math.MaxUint32)
			r.DstIdentity = identity.NumericIdentity(v)
		case 9:
			v, err = f.uint(math.MaxUint16)
			r.SrcEndpoint = uint16(v)
		case 10:
			v, err = f.uint(math.MaxUint16)
			r.DstEndpoint = uint16(v)
		case 11:
			v, err = f.uint(math.MaxUint8)
			r.Protocol = uint8(v)
		case 12:
			v, err = f.uint(math.MaxUint64)
			r.Latency = time.Duration(v)
		case 13:
			r.DNS, err = decodeDNS(f)
		case 14:
			r.HTTP, err = decodeHTTP(f)
		}
		return err
	})
	if err != nil {
		return r, err
	}
	return r, r.check()
}

func decodeDNS(f field) (*DNSRecord, error) {
	d := &DNSRecord{}
	return d, f.each(func(f field) error {
		var v uint64
		var s string
		var err error
		switch f.num {
		case 1:
			d.Query, err = f.text()
		case 2:
			s, err = f.text()
			d.QTypes = append(d.QTypes, s)
		case 3:
			v, err = f.uint(math.MaxUint16)
			d.RCode = uint16(v)
		case 4:
			if f.typ != protowire.BytesType {
				return errWireType
			}
			var ip netip.Addr
			err = ip.UnmarshalBinary(f.bytes)
			d.IPs = append(d.IPs, ip)
		case 5:
			v, err = f.uint(math.MaxUint32)
			d.TTL = uint32(v)
		case 6:
			s, err = f.text()
			d.CNAMEs = append(d.CNAMEs, s)
		case 7:
			s, err = f.text()
			d.RRTypes = append(d.RRTypes, s)
		}
		return err
	})
}

func decodeHTTP(f field) (*HTTPRecord, error) {
	h := &HTTPRecord{}
	return h, f.each(func(f field) error {
		var v uint64
		var err error
		switch f.num {
		case 1:
			h.Method, err = f.text()
		case 2:
			h.URL, err = f.text()
		case 3:
			h.Protocol, err = f.text()
		case 4:
			v, err = f.uint(999)
			h.Code = int(v)
		case 5:
			var name string
			var values []string
			err = f.each(func(f field) error {
				var s string
				var err error
				switch f.num {
				case 1:
					name, err = f.text()
				case 2:
					s, err = f.text()
					values = append(values, s)
				}
				return err
			})
			if h.Headers == nil {
				h.Headers = make(map[string][]string)
			}
			h.Headers[name] = append(h.Headers[name], values...)
		}
		return err
	})
}

// readFrame reads the next frame's message into buf. A frame longer
// than maxRecord is none a Sender writes: the connection is not one to
// go on reading.
func readFrame(br *bufio.Reader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	switch {
	case err != nil:
		return buf[:0], err
	case n > maxRecord:
		return buf[:0], fmt.Errorf("a frame of %d bytes, over %d", n, maxRecord)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err = io.ReadFull(br, buf)
	return buf, err
}
