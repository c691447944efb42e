package cni

import (
	"errors"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// FuzzParseConf: whatever the runtime hands in, parsing ends in a
// configuration or a CNI error object, never a panic or a bare error.
func FuzzParseConf(f *testing.F) {
	f.Add([]byte(testConf))
	f.Add([]byte(`{"cniVersion":"1.1.0","mtu":1450,"socket-path":"/run/c.sock","prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.1/32"}]}}`))
	f.Add([]byte(`{"cni.dev/valid-attachments":[{"containerID":"a","ifname":"eth0"}]}`))
	f.Add([]byte(`{"mtu":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConf(b)
		if err != nil {
			var e *types.Error
			if !errors.As(err, &e) || e.Code == 0 || e.Msg == "" {
				t.Fatalf("not a CNI error: %#v", err)
			}
			return
		}
		if c.MTU != 0 && (c.MTU < 576 || c.MTU > 65535) {
			t.Fatalf("accepted mtu %d", c.MTU)
		}
	})
}

func FuzzParseArgs(f *testing.F) {
	f.Add("IgnoreUnknown=1;K8S_POD_NAMESPACE=prod;K8S_POD_NAME=web")
	f.Add(";;=")
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := ParseArgs(s); err != nil {
			var e *types.Error
			if !errors.As(err, &e) {
				t.Fatalf("not a CNI error: %#v", err)
			}
		}
	})
}
