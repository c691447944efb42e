package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The shapes of cilium-cli's connectivity test's
// client-egress-to-cidrgroup-deny and -deny-by-label: a CiliumCIDRGroup
// holding the lab's world prefix, and a policy that denies egress to it
// except one of the world's addresses, beside one that allows all egress.
const cidrGroupClient = `apiVersion: v1
kind: Namespace
metadata: {name: cg}
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: cg, labels: {kind: client}}
spec:
  containers:
  - name: c
    image: ` + agnhost + `
    args: ["pause"]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: allow-all-egress, namespace: cg}
spec:
  endpointSelector: {matchLabels: {kind: client}}
  egress: [{toEntities: [all]}]
`

const cidrGroupByRef = `apiVersion: cilium.io/v2
kind: CiliumCIDRGroup
metadata: {name: external}
spec:
  externalCIDRs: [%s]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: deny-group, namespace: cg}
spec:
  endpointSelector: {matchLabels: {kind: client}}
  egressDeny:
  - toCIDRSet:
    - cidrGroupRef: external
      except: [192.0.2.1/32]
`

const cidrGroupByLabel = `apiVersion: cilium.io/v2alpha1
kind: CiliumCIDRGroup
metadata: {name: labelled, labels: {destination: external}}
spec:
  externalCIDRs: [192.0.2.0/24]
---
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: deny-group, namespace: cg}
spec:
  endpointSelector: {matchLabels: {kind: client}}
  egressDeny:
  - toCIDRSet:
    - cidrGroupSelector: {matchLabels: {destination: external}}
      except: [192.0.2.1/32]
`

// TestPrivilegedCIDRGroupPolicy: a pod's connections to the world's
// addresses (192.0.2.1 and .2, the lab's default world) are denied as the
// CiliumCIDRGroup that a policy names says, by name and by labels, and
// change with the group.
func TestPrivilegedCIDRGroupPolicy(t *testing.T) {
	lab := StartLab(t, "cgr", "--nodes", "1", "--cni=cilium")
	lab.KubectlApply(cidrGroupClient)
	lab.Kubectl("-n", "cg", "wait", "--for=condition=Ready", "pod/client", "--timeout=3m")
	// reach waits until connecting to each world address gives want.
	reach := func(what string, want map[string]bool) {
		t.Helper()
		start := time.Now()
		lab.Eventually(what, time.Minute, func() error {
			var bad []string
			for addr, w := range want {
				_, err := lab.run("kubectl", "-n", "cg", "exec", "client", "--", "/agnhost", "connect", addr+":80", "--timeout=2s")
				if (err == nil) != w {
					bad = append(bad, fmt.Sprintf("%s connects=%v", addr, err == nil))
				}
			}
			if len(bad) > 0 {
				return fmt.Errorf("%s", strings.Join(bad, ", "))
			}
			return nil
		})
		t.Logf("%s: as expected after %s", what, time.Since(start).Round(time.Millisecond))
	}
	both := map[string]bool{"192.0.2.1": true, "192.0.2.2": true}
	onlyExcepted := map[string]bool{"192.0.2.1": true, "192.0.2.2": false}
	reach("no group policy", both)

	lab.KubectlApply(fmt.Sprintf(cidrGroupByRef, "192.0.2.0/24"))
	reach("cidrGroupRef to the world's prefix, one address excepted", onlyExcepted)
	lab.KubectlApply(fmt.Sprintf(cidrGroupByRef, "198.51.100.0/24"))
	reach("the group moved away", both)
	lab.KubectlApply(fmt.Sprintf(cidrGroupByRef, "198.51.100.0/24, 192.0.2.2/32"))
	reach("the group holds the other address again", onlyExcepted)
	lab.Kubectl("delete", "ciliumcidrgroup", "external")
	reach("the group deleted", both)

	lab.KubectlApply(cidrGroupByLabel)
	reach("cidrGroupSelector of a v2alpha1 group", onlyExcepted)
	lab.Kubectl("label", "ccg", "labelled", "destination=internal", "--overwrite")
	reach("the group's labels no longer match", both)
}
