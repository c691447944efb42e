#!/usr/bin/env bash
# Installs the Debian packages that a make target needs, or names them.
#
#   hack/deps.sh demo|test|generate|ui ...
#
# As root on Debian, missing packages are installed with apt-get (the one
# `apt-get update` first is shown); anywhere else the missing ones are
# listed with the command that installs them, and the exit status is 1.
# `make demo`, `make test` and `.ci/run` all go through this script, so a
# fresh machine needs no manual step.
set -euo pipefail

# The clang that `make generate` compiles bpf/ with: pinned to one Debian
# package version, so that check-generated fails only on real staleness.
CLANG_PKG=clang-14
CLANG_VERSION=1:14.0.6-12

# A lab pod's root is this machine's /usr: the tools the real agnhost image
# carries for network tests (sh, nc of netcat-openbsd, curl, wget, dig and
# nslookup, ss) come from these packages.
podtools=(netcat-openbsd curl wget dnsutils iproute2)
# ... and those the images of Cilium's connectivity test carry
# (lab/internal/images/connectivity.go): alpine-curl's ping and tcpdump,
# alpine/socat's socat, network-perf's iperf3. Debian has no netperf in main:
# the lab builds a stand-in (lab/cmd/standins).
podtools+=(iputils-ping iputils-arping tcpdump socat iperf3)
# ... and what Cilium's agent image carries that the suite runs in it
# (its drop check pipes `cilium metrics list -o json` into jq).
podtools+=(jq)

pkgs=()
for target in "$@"; do
	case $target in
	demo) pkgs+=(iproute2 util-linux iptables nftables conntrack "${podtools[@]}") ;;
	# qemu, busybox-static, cpio, xz: make test-netkit-vm boots a kernel
	# with netkit when this one has none. python3: the e2e tests' stream
	# client runs in a pod, whose root is this machine's filesystem. gcc,
	# libc6-dev: go test -race links the race runtime through cgo.
	# chromium: the Hubble UI's browser tests drive it headless (test/browser).
	# firefox-esr: the same tests run in Firefox too, driven over Marionette.
	test) pkgs+=(iproute2 util-linux iptables nftables conntrack qemu-system-x86 busybox-static cpio xz-utils python3 gcc libc6-dev chromium firefox-esr "${podtools[@]}") ;;
	generate) pkgs+=("$CLANG_PKG" llvm-14 libbpf-dev) ;;
	ui) ;;
	*) echo "deps: unknown target $target (demo, test, generate, ui)" >&2; exit 2 ;;
	esac
	# The Hubble UI's page is built and tested with Node.js and npm (make
	# ui, make test-ui): the machine's own when it has them (a newer one
	# than Debian's, perhaps from another repository), else Debian's.
	case $target in
	test | generate | ui) command -v node >/dev/null && command -v npm >/dev/null || pkgs+=(nodejs npm) ;;
	esac
done

missing=()
for pkg in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
# Duplicates out, order kept.
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | awk 'NF && !seen[$0]++')

if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
		echo "deps: missing Debian packages: ${missing[*]} (apt-get install ${missing[*]})" >&2
		exit 1
	fi
	echo "deps: installing ${missing[*]} (apt-get; about a minute)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	args=()
	for pkg in "${missing[@]}"; do
		[ "$pkg" = "$CLANG_PKG" ] && pkg="$CLANG_PKG=$CLANG_VERSION"
		args+=("$pkg")
	done
	apt-get install -y -qq --no-install-recommends "${args[@]}" >/dev/null
	echo "deps: installed ${missing[*]}"
fi

for target in "$@"; do
	[ "$target" = generate ] || continue
	have=$(dpkg-query -W -f='${Version}' "$CLANG_PKG")
	if [ "$have" != "$CLANG_VERSION" ]; then
		echo "deps: make generate needs $CLANG_PKG $CLANG_VERSION (installed: $have); other versions compile bpf/ differently" >&2
		exit 1
	fi
done
