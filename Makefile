# cilium-go: build, test and demo. See README.md.
SHELL := /bin/bash
GO    ?= go
BIN   := $(CURDIR)/bin

# The Kubernetes release the lab builds; `kubectl version` reports it.
K8S_VERSION := v1.37.2
K8S_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=37 \
	-X $(p).gitTreeState=clean -X $(p).buildDate=2026-01-01T00:00:00Z)

K8S_CMDS := k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy \
	k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/test/images/agnhost \
	k8s.io/kubernetes/test/images/regression-issue-74839
CNI_CMDS := github.com/containernetworking/plugins/plugins/main/bridge \
	github.com/containernetworking/plugins/plugins/main/loopback \
	github.com/containernetworking/plugins/plugins/ipam/host-local \
	github.com/containernetworking/plugins/plugins/meta/portmap

LAB_FLAGS ?= --nodes 2

.PHONY: all ui test-ui build build-cilium build-hubble-upstream build-lab build-k8s build-cni build-coredns build-standins generate check-generated check-tidy check-fmt \
	test test-unit lint test-fuzz fuzz test-skips-reset test-netkit-vm test-lab test-e2e-smoke e2e bench bench-datapath bench-datapath-netkit bench-cni bench-services bench-policy bench-hubble bench-hubble-ui bench-l7 bench-compare demo lab-up lab-down clean

all: build

build: build-lab build-cilium

# cilium-go's own binaries, where the lab's image catalog takes them from.
# hack/goinstall.sh is `go install` with a progress line: a cold build of
# Kubernetes takes half an hour.
GOINSTALL := $(CURDIR)/hack/goinstall.sh

build-cilium:
	GOBIN=$(BIN) $(GOINSTALL) cilium-go ./cmd/cilium-agent ./cmd/cilium-cni ./cmd/cilium-operator ./cmd/cilium-dbg ./cmd/hubble ./cmd/hubble-relay ./cmd/hubble-ui ./cmd/cilium-health ./cmd/cilium-proxy

# Cilium's own hubble CLI, which the e2e tests run against cilium-go to
# prove that it works unchanged: built from test/hubblecli, a module of
# its own, so that its dependencies stay out of cilium-go's go.mod and
# binaries (hack/depcheck).
build-hubble-upstream:
	cd test/hubblecli && GOBIN=$(BIN)/upstream $(GOINSTALL) hubble-upstream github.com/cilium/cilium/hubble

# `go install` into bin/ relinks a binary only when it is stale.
build-k8s:
	cd lab && GOBIN=$(BIN) $(GOINSTALL) kubernetes -ldflags '$(K8S_LDFLAGS)' $(K8S_CMDS)

build-cni:
	cd lab && GOBIN=$(BIN)/cni $(GOINSTALL) cni-plugins $(CNI_CMDS)

build-coredns:
	cd lab/tools/coredns && GOBIN=$(BIN) $(GOINSTALL) coredns .

# Stand-ins for the programs of the images Cilium's connectivity test deploys
# (lab/internal/images/connectivity.go): pause, json-mock, tcd-client,
# tcd-server, netperf, netserver, echo-advanced.
build-standins:
	cd lab && GOBIN=$(BIN) $(GOINSTALL) standins ./cmd/standins/...

build-lab: build-k8s build-cni build-coredns build-standins
	cd lab && GOBIN=$(BIN) $(GOINSTALL) cilium-lab ./cmd/cilium-lab

# bpf2go compiles bpf/ with the Debian clang that hack/deps.sh pins; the
# Hubble UI's page is built by the lockfile's esbuild.
generate: ui
	./hack/deps.sh generate
	$(GO) generate ./...

# The Hubble UI's page (ui/, TypeScript): npm ci installs exactly the
# lockfile's packages, esbuild bundles the page into pkg/hubble/ui/dist,
# which the hubble-ui binary embeds, so that neither its image nor the lab
# needs Node.js. The build is committed and checked fresh like the BPF
# objects.
UI_DEPS := ui/node_modules/.package-lock.json
$(UI_DEPS): ui/package.json ui/package-lock.json
	./hack/deps.sh ui
	cd ui && npm ci --no-audit --no-fund
ui: $(UI_DEPS)
	cd ui && node build.mjs

# The page's type check (tsc) and unit tests (node's test runner): the
# map's layout, the filter parser, flow rendering.
test-ui: $(UI_DEPS)
	cd ui && npx tsc --noEmit && npm test --silent

# CI: the committed generated files must be what `make generate` produces: the
# bpf2go output (internal/datapath/*_bpfel*, bench/datapath/floor_bpfel*) from bpf/ with the pinned Debian
# clang, deepcopy code (pkg/**/zz_generated.deepcopy.go) and CRD manifests
# (install/kubernetes/crds, from hack/crdgen) and the Hubble UI's page
# (pkg/hubble/ui/dist, from ui/).
GENERATED_PATHS := internal/datapath bench/datapath pkg install/kubernetes/crds
check-generated: generate
	@git diff --exit-code -- $(GENERATED_PATHS) || { echo "generated output is stale: run make generate" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- $(GENERATED_PATHS))" || { echo "untracked generated files: run make generate and commit" >&2; exit 1; }

# CI: every module's go.mod and go.sum are what `go mod tidy` makes of them
# (direct imports are not `// indirect`). -diff changes nothing, prints the
# difference and fails.
GO_MODULES := . lab lab/tools/coredns test/hubblecli test/healthapi hack/tools
check-tidy:
	@for m in $(GO_MODULES); do \
		(cd $$m && $(GO) mod tidy -diff) || { echo "$$m/go.mod is not tidy: run go mod tidy in $$m" >&2; exit 1; }; \
	done

# CI: every Go file is as gofmt writes it.
check-fmt:
	@out=$$(gofmt -l .); test -z "$$out" || { echo "not gofmt-formatted (run gofmt -w):" >&2; echo "$$out" >&2; exit 1; }

# Installs (as root on Debian) or names the packages a target needs, then
# checks the kernel and tools.
prereqs-%:
	@./hack/deps.sh $*
	@./hack/prereqs.sh

# Test output goes through hack/testreport: plain go test output (failures,
# each package's ok/FAIL line; all of it for the e2e tests), then the tests
# that skipped and why. With CI=true a skip whose reason matches no pattern
# of hack/skip-allowlist.txt fails the run. `make test` lists every skip of
# its runs again at its end.
TESTREPORT := $(CURDIR)/.cache/bin/testreport
SKIPS      := $(CURDIR)/.cache/test-skips.jsonl
REPORT     := $(TESTREPORT) -allow $(CURDIR)/hack/skip-allowlist.txt -record $(SKIPS)

$(TESTREPORT): $(wildcard hack/testreport/*.go)
	$(GO) build -o $@ ./hack/testreport

test: test-skips-reset prereqs-test test-unit test-ui test-fuzz test-netkit-vm test-lab test-e2e-smoke
	@echo "== make test: skipped tests of all runs"
	@$(TESTREPORT) -allow $(CURDIR)/hack/skip-allowlist.txt -summary $(SKIPS)

test-skips-reset:
	@rm -f $(SKIPS)

# Everything but the lab e2e suite, which needs the built binaries and a lab.
# All of it runs once, under the race detector: the agent's reconcilers, jobs
# and API share state across goroutines. The slowest package,
# internal/datapath (BPF program and privileged netns tests), spends its time
# in the kernel (verifier, BPF_PROG_RUN, traffic), which -race does not slow:
# on 2 cores with a warm cache the whole set took 4m25s with -race, 3m18s
# without. -race needs cgo, so a C compiler (hack/deps.sh installs gcc).
UNIT_PKGS = $(shell $(GO) list ./... | grep -v /test/e2e)

# The linter runs first: a finding fails the run.
test-unit: lint $(TESTREPORT)
	set -o pipefail; $(GO) test -race -count=1 -json $(UNIT_PKGS) 2>&1 | $(REPORT)
	# The health API against Cilium's own generated client, a module of its own.
	cd test/healthapi && $(GO) test -race -count=1 ./...

# golangci-lint with .golangci.yml (go vet, staticcheck, errorlint, sloglint,
# depguard, ...), pinned by the tool directive of hack/tools/go.mod: a module
# of its own, so that the linter's hundreds of dependencies stay out of
# cilium-go's go.mod. By hand: go tool -modfile=hack/tools/go.mod
# golangci-lint run ./... (in lab/: -modfile=../hack/tools/go.mod
# --config ../.golangci.yml). The build goes through goinstall.sh, which
# tells how far a cold build (3 minutes on 2 busy cores) has come.
# LINT_MODULES are linted with the one config; test/hubblecli is not: it
# holds no code, only the tool directive that builds Cilium's hubble CLI.
GOLANGCI_LINT := $(CURDIR)/.cache/bin/golangci-lint
LINT_MODULES  := . lab lab/tools/coredns test/healthapi
lint:
	@cd hack/tools && GOBIN=$(CURDIR)/.cache/bin $(GOINSTALL) golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@for m in $(LINT_MODULES); do \
		echo "== lint: $$m"; start=$$SECONDS; \
		(cd $$m && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...) || exit 1; \
		echo "== lint: $$m took $$((SECONDS - start))s"; \
	done

# Every fuzz target for FUZZTIME each (make fuzz FUZZTIME=5m); make test
# runs each for 5000 inputs (a few seconds): a count, not a time, because
# go1.26's fuzzer now and then ends a timed run with "context deadline
# exceeded" instead of PASS, which would fail CI for nothing.
FUZZTIME ?= 1m
fuzz: $(TESTREPORT)
	FUZZTIME=$(FUZZTIME) TESTREPORT="$(REPORT) -v" ./hack/fuzz.sh

test-fuzz: $(TESTREPORT)
	FUZZTIME=5000x TESTREPORT="$(REPORT) -v" ./hack/fuzz.sh

# The datapath benchmark's netkit scenarios on a kernel with netkit, in
# the netkit VM where this kernel has none (only where KVM works: the VM's
# probe boot decides). BENCH_FLAGS passes e.g. -reps 7.
bench-datapath-netkit: prereqs-test
	./hack/netkit-vm.sh bench $(BENCH_FLAGS)

# The datapath's tests on a kernel with netkit pod devices (Debian's
# backports kernel in qemu) when this machine's kernel has none.
test-netkit-vm:
	./hack/netkit-vm.sh

# The lab's privileged tests run the built control plane, agnhost, CoreDNS
# and, against the install manifests, cilium-operator.
test-lab: build-lab build-cilium
	cd lab && $(GO) vet ./...
	set -o pipefail; cd lab && $(GO) test -count=1 -json ./... 2>&1 | $(REPORT)

# The lab runs cilium-go by default: its binaries and cilium-dbg too. The
# smoke subset runs the cilium lab in tunnel and native routing mode; -short
# trims the native one to what depends on the mode.
# The browser tests' screenshots go to .cache/test-artifacts (go test
# -artifacts), for review.
ARTIFACTS := $(CURDIR)/.cache/test-artifacts
test-e2e-smoke: build-lab build-cilium build-hubble-upstream $(TESTREPORT)
	mkdir -p $(ARTIFACTS)
	set -o pipefail; $(GO) test -count=1 -json -short -timeout 20m -artifacts -outputdir $(ARTIFACTS) ./test/e2e -run 'TestPrivilegedSmoke' -args -bin $(BIN) 2>&1 | $(REPORT) -v

# CILIUM_CLI: Cilium's cilium-cli binary, for the tests that run it (make e2e
# CILIUM_CLI=/path/to/cilium); without it they skip.
CILIUM_CLI ?=
e2e: prereqs-test build-lab build-cilium build-hubble-upstream $(TESTREPORT)
	set -o pipefail; $(GO) test -count=1 -json -timeout 60m ./test/e2e -args -bin $(BIN) -cilium-cli "$(CILIUM_CLI)" 2>&1 | $(REPORT) -v

bench: prereqs-test build bench-datapath bench-cni bench-services bench-policy bench-hubble bench-hubble-ui bench-l7

# The datapath benchmark (root): node-to-node baseline, kernel routing,
# our datapath native/tunnel, native with 10k policy entries, and the floor
# of any datapath on veth pods (bare redirects).
bench-datapath: prereqs-test
	$(GO) run ./bench/datapath

# The Services benchmark (root): connect latency through a ClusterIP with
# 10 to 10,000 services in the maps (tc and socket LB) against the pod IP,
# a stream through it, the control plane's EndpointSlice-to-map latency
# and heap with 10,000 Services, and, in labs running at once, cilium-go
# side by side with kube-proxy iptables and nftables at 10 to 10,000
# Services. BENCH_SERVICES_FLAGS passes e.g. -quick or -reps 10.
# The policy benchmark (root): the agent's CPU per identity add with
# 1,000 selectors at 100 against 10,000 identities, into real BPF maps.
# BENCH_POLICY_FLAGS passes e.g. -reps 5.
# The policy benchmark (root): identity churn in process, implementation
# delay on a lab cluster, then connect/request/close with 10,000 policy
# entries against none, which is bench/datapath's (c')/(c).
bench-policy: prereqs-test build-lab build-cilium
	$(GO) run ./bench/policy -bin $(BIN) $(BENCH_POLICY_FLAGS)
	$(GO) run ./bench/datapath -tests crr -scenarios "c,c'" -reps 20

# The Hubble benchmark (root): pod-to-pod throughput and connect/request/
# close with Hubble on (medium aggregation, the agent's event path) against
# off, no events lost at 10,000 events/s with the CPU it takes, and the
# memory of full rings.
bench-hubble: prereqs-test
	$(GO) run ./bench/hubble $(BENCH_HUBBLE_FLAGS)

# The Hubble UI benchmark: 10,000 flows/s of a namespace of 100
# workloads through two nodes' Observers, hubble-relay and hubble-ui to
# the page in headless Chromium for a minute: the time to the first
# complete map, the page's frame time (p95 target under 50 ms) against
# the page with no flows, and its heap once the window is full (flat).
# BENCH_HUBBLE_UI_FLAGS passes e.g. -rate 20000 or -screenshot map.png.
bench-hubble-ui: prereqs-test
	$(GO) run ./bench/hubble-ui $(BENCH_HUBBLE_UI_FLAGS)

# The layer-7 benchmark (root): HTTP/1.1 rate and latency on kept-alive
# connections through the proxy against L4 policy only (to a server on
# the client's node and on the other), DNS lookup p99 through the DNS
# proxy against direct, and the heap of 1,000 FQDN selectors and 10,000
# learned IPs in the proxy, the name cache and the policy engine.
# BENCH_L7_FLAGS passes e.g. -reps 7 or -parts memory.
bench-l7: prereqs-test
	$(GO) run ./bench/l7 $(BENCH_L7_FLAGS)

bench-services: prereqs-test build-lab build-cilium
	$(GO) run ./bench/services -bin $(BIN) $(BENCH_SERVICES_FLAGS)

# The CNI benchmark (root): concurrent ADD latency through cilium-cni and a
# real agent against bridge + host-local, and the agent's memory with 100
# endpoints. BENCH_CNI_FLAGS passes e.g. -rounds 10.
bench-cni: prereqs-test build-cilium build-cni
	$(GO) run ./bench/cni -bin $(BIN) $(BENCH_CNI_FLAGS)

# The current tree against an earlier revision, BASE, in one run (root):
# bench/cni's ADD latency and agent memory, bench/policy's lab delays and
# churn CPU, bench/services' control plane, each program run by both trees
# in turn (the base in a git worktree, each tree building its own
# binaries), and head/base per figure with its 95% interval and a verdict
# per part. Not part of `make bench`: it builds every binary twice.
# BENCH_COMPARE_FLAGS passes e.g. -reps 5 -parts cni,services.
BASE ?= afa0859
bench-compare: prereqs-test
	$(GO) run ./bench/compare -base $(BASE) $(BENCH_COMPARE_FLAGS)

demo: prereqs-demo build-lab build-cilium
	./hack/demo.sh

lab-up: build-lab build-cilium
	$(BIN)/cilium-lab up $(LAB_FLAGS)

lab-down:
	@if [ -x $(BIN)/cilium-lab ]; then $(BIN)/cilium-lab down; fi

clean: lab-down
	rm -rf $(BIN)
