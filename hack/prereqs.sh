#!/usr/bin/env bash
# Checks what `make demo` and `make test` need and names whatever is missing.
set -u
fail=0
need() { echo "prereqs: $*" >&2; fail=1; }

[ "$(id -u)" = 0 ] || need "run as root (the lab creates network namespaces and loads BPF programs)"

read -r major minor _ < <(uname -r | tr '.-' '  ')
if [ "${major:-0}" -lt 6 ] || { [ "$major" -eq 6 ] && [ "${minor:-0}" -lt 1 ]; }; then
	need "Linux >= 6.1 is required (this is $(uname -r))"
fi

command -v go >/dev/null || need "Go is not installed (go 1.26 or newer)"
for tool in ip nsenter unshare iptables nft; do
	command -v "$tool" >/dev/null || need "'$tool' is missing (Debian: apt-get install iproute2 util-linux iptables nftables)"
done

if [ "$(id -u)" = 0 ]; then
	[ -d /sys/fs/bpf ] || need "/sys/fs/bpf is missing: the kernel lacks bpffs"
	grep -qw bpf /proc/filesystems || need "the kernel has no bpf filesystem"
	grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || need "the kernel has no overlay filesystem"
	# Probe in a throwaway network namespace: nothing touches the root one.
	unshare --net ip link add probe0 type veth peer name probe1 2>/dev/null ||
		need "cannot create veth pairs in a network namespace (kernel lacks veth or netns)"
	unshare --net ip link add probe0 type bridge 2>/dev/null ||
		need "cannot create bridges in a network namespace (kernel lacks bridge support)"
fi
exit $fail
