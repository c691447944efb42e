#!/usr/bin/env bash
# make demo: a two-node lab networked by cilium-go, pods on both nodes, traffic
# between them, and what cilium-go saw of it.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/bin
STATE=${CILIUM_LAB_STATE:-/var/lib/cilium-lab}
export KUBECONFIG=$STATE/kubeconfig
k() { "$BIN/kubectl" "$@"; }

if [ -f "$STATE/plan.json" ]; then
	echo "A lab is already up in $STATE; taking it down first."
	"$BIN/cilium-lab" down --state-dir "$STATE"
fi
"$BIN/cilium-lab" up --state-dir "$STATE" ${LAB_FLAGS:---nodes 2}

echo; echo "== Nodes"
k get nodes -o wide

echo; echo "== cilium-go, installed from install/kubernetes: the cilium DaemonSet, the operator, hubble-relay and hubble-ui"
k -n kube-system get daemonsets,deployments,pods -o wide
k -n kube-system exec ds/cilium -c cilium-agent -- cilium-dbg status | head -8 || true

echo; echo "== A Deployment of 4 agnhost echo servers spread over the nodes, and a Service"
k apply -f - <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo}
spec:
  replicas: 4
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: echo}}}
      containers:
      - name: echo
        image: registry.k8s.io/e2e-test-images/agnhost:2.66
        args: ["netexec", "--http-port=8080"]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  selector: {app: echo}
  ports: [{port: 80, targetPort: 8080}]
YAML
k rollout status deployment/echo --timeout=180s
k get pods -o wide

first=$(k get pods -l app=echo -o jsonpath='{.items[0].metadata.name}')
echo; echo "== From $first: every echo pod by IP, then the Service by DNS name"
for ip in $(k get pods -l app=echo -o jsonpath='{.items[*].status.podIP}'); do
	printf '%s -> %s: ' "$first" "$ip"
	k exec "$first" -- /agnhost connect "$ip:8080" --timeout=5s && echo ok
done
for i in 1 2 3 4; do
	printf '%s -> echo.default.svc.cluster.local -> ' "$first"
	# bash's /dev/tcp resolves the name through the pod's resolv.conf, i.e. cluster DNS.
	k exec "$first" -- bash -c 'exec 3<>/dev/tcp/echo.default.svc.cluster.local/80 &&
		printf "GET /hostname HTTP/1.0\r\n\r\n" >&3 && tail -n1 <&3'
	echo
done

node1=${LAB_NAME:-lab}-node1
dbg() { "$BIN/cilium-lab" exec --state-dir "$STATE" "$node1" -- "$BIN/cilium-dbg" "$@"; }
echo; echo "== cilium-go: an endpoint per pod, one identity per set of labels, on every node"
k get ciliumendpoints -A
k get ciliumidentities
k get ciliumnodes -o custom-columns=NODE:.metadata.name,POD-CIDR:.spec.ipam.podCIDRs
echo; echo "== On $node1: the agent, its endpoints, the Services it balances (no kube-proxy), and the connections (flows) its datapath tracked"
dbg status || true
dbg endpoint list || true
dbg service list || true
dbg bpf ct list || true
dbg bpf metrics list || true

echo; echo "== A policy: echo pods take port 8080 from echo pods, and never from a pod labelled role=intruder"
k apply -f - <<'YAML'
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata: {name: echo-guard}
spec:
  endpointSelector: {matchLabels: {app: echo}}
  ingress: [{fromEndpoints: [{matchLabels: {app: echo}}], toPorts: [{ports: [{port: "8080", protocol: TCP}]}]}]
  ingressDeny: [{fromEndpoints: [{matchLabels: {role: intruder}}]}]
YAML
k run intruder --image=registry.k8s.io/e2e-test-images/agnhost:2.66 --labels=role=intruder --restart=Never -- pause
k wait --for=condition=Ready pod/intruder --timeout=120s
target=$(k get pods -l app=echo -o jsonpath='{.items[1].status.podIP}')
# The policy reaches every node's datapath within milliseconds; allow a moment.
sleep 2
printf '%s -> %s:8080: ' "$first" "$target"
k exec "$first" -- /agnhost connect "$target:8080" --timeout=5s && echo ok
printf 'intruder -> %s:8080: ' "$target"
k exec intruder -- /agnhost connect "$target:8080" --timeout=2s && echo "ok (unexpected)" || echo "refused, as the policy says"

echo; echo "== Hubble through hubble-relay, which asks every node: the nodes, then the flows to port 8080 with the policies that decided"
# The relay wants mutual TLS: the operator issued the CLI a certificate
# (the hubble-cli-client-certs Secret), which the lab copied to its state
# directory with the relay's address (its Service, as seen from a node).
HUBBLE_TLS=$STATE/pki/hubble
relay_flags=(--server "$(cat "$STATE/hubble-relay")" --tls --tls-server-name hubble.hubble-relay.cilium.io --tls-ca-cert-files "$HUBBLE_TLS/ca.crt"
	--tls-client-cert-file "$HUBBLE_TLS/cli.crt" --tls-client-key-file "$HUBBLE_TLS/cli.key")
hubble() { "$BIN/cilium-lab" exec --state-dir "$STATE" "$node1" -- "$BIN/hubble" "$@" "${relay_flags[@]}"; }
hubble list nodes || true
hubble observe --from-namespace default --to-port 8080 --last 20 --print-policy-names || true
echo; echo "== The calls to the echo Service that socket-level balancing translated: to the ClusterIP (TRACED), to a pod (TRANSLATED)"
hubble observe --type trace-sock --to-service default/echo --last 4 || true

echo; echo "== The lab"
"$BIN/cilium-lab" status --state-dir "$STATE" || true
cat <<MSG

The lab stays up. Try:
  export KUBECONFIG=$KUBECONFIG
  $BIN/kubectl get pods -A -o wide
  $BIN/cilium-lab exec $node1 -- ip route
  $BIN/cilium-lab exec $node1 -- $BIN/cilium-dbg monitor
  $BIN/cilium-lab exec $node1 -- $BIN/hubble observe --follow                           # this node
  $BIN/cilium-lab exec $node1 -- $BIN/hubble observe --follow ${relay_flags[*]}   # every node, through the relay
  make lab-down
MSG
# The lab's supervisor forwards 127.0.0.1 of this machine to the hubble-ui
# Service (cilium-lab up --ui-port).
if [ -f "$STATE/hubble-ui" ]; then
	echo "Hubble UI, in a browser on this machine: $(cat "$STATE/hubble-ui")"
fi
