#!/usr/bin/env bash
# Runs the datapath's tests (go test ./internal/datapath: BPF programs and
# the privileged netns tests, their netkit variants included) and the
# agent's netkit mode (its cells and cilium-cni through libcni) on a kernel
# that has netkit pod devices, for machines whose own kernel lacks them:
# Debian's backports cloud kernel (6.12, CONFIG_NETKIT=y) booted by qemu,
# under software emulation when there is no /dev/kvm, with an initramfs of
# busybox, the kernel modules the tests load and static test binaries.
#
#   hack/netkit-vm.sh               the tests (make test-netkit-vm)
#   hack/netkit-vm.sh bench [FLAGS] bench/datapath with FLAGS in the guest
#                                   (make bench-datapath-netkit), only where
#                                   KVM works: emulated timings mean nothing
#
# On a kernel with netkit there is nothing to do: the tests of `make test`
# ran the netkit variants already, and the benchmark runs here. The
# machine's apt configuration is left alone (the kernel package is fetched
# with a private sources list), and the kernel package stays cached in
# .cache/netkit-vm. The exit status is the tests' (the benchmark's).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-test}
[ $# -gt 0 ] && shift
case $mode in test | bench) ;; *) echo "netkit-vm: unknown mode $mode (test, bench)" >&2; exit 2 ;; esac

if unshare --net ip link add nk0 type netkit 2>/dev/null; then
	if [ "$mode" = bench ]; then
		exec go run ./bench/datapath "$@"
	fi
	echo "netkit-vm: this kernel has netkit; the datapath tests ran its variants here"
	exit 0
fi

if [ "$(uname -m)" != x86_64 ]; then
	echo "netkit-vm: boots Debian's amd64 kernel: an x86_64 machine is needed (this is $(uname -m))" >&2
	exit 1
fi

missing=()
for tool in qemu-system-x86_64:qemu-system-x86 busybox:busybox-static cpio:cpio xz:xz-utils apt-get:apt dpkg-deb:dpkg; do
	command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "netkit-vm: missing tools (Debian: apt-get install ${missing[*]})" >&2
	exit 1
fi
if ldd "$(command -v busybox)" >/dev/null 2>&1; then
	echo "netkit-vm: busybox is dynamically linked; the initramfs needs busybox-static" >&2
	exit 1
fi

cache=.cache/netkit-vm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
qemu=
mkdir -p "$cache/apt/lists/partial" "$cache/apt/archives/partial"

# The kernel: whatever the backports cloud metapackage depends on today.
. /etc/os-release
echo "deb http://deb.debian.org/debian ${VERSION_CODENAME}-backports main" >"$cache/apt/sources.list"
apt=(-o "Dir::Etc::SourceList=$PWD/$cache/apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
	-o "Dir::State::Lists=$PWD/$cache/apt/lists" -o "Dir::Cache=$PWD/$cache/apt"
	-o "Dir::Cache::Archives=$PWD/$cache/apt/archives" -o APT::Sandbox::User=root)
apt-get "${apt[@]}" update -qq
image=$(apt-cache "${apt[@]}" depends linux-image-cloud-amd64 | sed -n 's/^ *Depends: \(linux-image-[^ ]*\)$/\1/p' | head -1)
[ -n "$image" ] || { echo "netkit-vm: no backports cloud kernel for ${VERSION_CODENAME}" >&2; exit 1; }
deb=$(ls "$cache"/"$image"_*.deb 2>/dev/null | head -1 || true)
if [ -z "$deb" ]; then
	(cd "$cache" && apt-get "${apt[@]}" download -qq "$image")
	deb=$(ls "$cache"/"$image"_*.deb | head -1)
fi
dpkg-deb -x "$deb" "$work/kernel"
config=$(ls "$work"/kernel/boot/config-*)
grep -q '^CONFIG_NETKIT=y' "$config" || { echo "netkit-vm: $image is built without CONFIG_NETKIT" >&2; exit 1; }
vmlinuz=$(ls "$work"/kernel/boot/vmlinuz-*)
mods=$(ls -d "$work"/kernel/lib/modules/*/kernel)

# The initramfs: busybox, the modules the tests need (in load order), the
# test binary and an init that runs it and powers off.
root=$work/initramfs
mkdir -p "$root"/{bin,proc,sys,dev,tmp,run,mod}
cp "$(command -v busybox)" "$root/bin/busybox"
for cmd in sh mount insmod ip cat sed tr poweroff; do
	ln -s busybox "$root/bin/$cmd"
done
modules=(net/llc/llc net/802/stp net/bridge/bridge net/ipv4/udp_tunnel net/ipv6/ip6_udp_tunnel
	drivers/net/vxlan/vxlan drivers/net/veth net/xfrm/xfrm_algo net/xfrm/xfrm_user
	net/netfilter/nfnetlink net/sched/sch_ingress net/sched/cls_bpf)
for m in "${modules[@]}"; do
	xz -dc "$mods/$m.ko.xz" >"$root/mod/$(basename "$m").ko"
	echo "$(basename "$m")" >>"$root/mod/order"
done
# What the guest runs, and its flags (in /args, one a line).
if [ "$mode" = bench ]; then
	CGO_ENABLED=0 go build -o "$root/bin/bench" ./bench/datapath
	printf '%s\n' "$@" >"$root/args"
	run='/bin/bench $(guestargs)
status=$?'
else
	CGO_ENABLED=0 go test -c -o "$root/bin/datapath.test" ./internal/datapath
	CGO_ENABLED=0 go test -c -o "$root/bin/agent.test" ./cmd/cilium-agent
	CGO_ENABLED=0 go build -o "$root/bin/cilium-cni" ./cmd/cilium-cni
	echo "${NETKIT_VM_TESTARGS:-}" | tr ',' '\n' >"$root/args"
	run='/bin/datapath.test -test.count=1 -test.v $(guestargs)
status=$?
# The agent'"'"'s netkit mode end to end: its cells, cilium-cni through libcni.
CILIUM_CNI_BIN=/bin/cilium-cni /bin/agent.test -test.count=1 -test.v -test.run '"'"'TestPrivilegedNetkitMode$'"'"' || status=1'
fi
{
	cat <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mount -t bpf bpf /sys/fs/bpf
# Socket-level balancing's tests attach to a cgroup of their own.
mount -t cgroup2 cgroup2 /sys/fs/cgroup
for m in $(cat /mod/order); do insmod /mod/$m.ko || echo "netkit-vm: insmod $m failed"; done
ip link set lo up
echo "netkit-vm: $(cat /proc/version)"
cd /tmp
guestargs() { cat /args; }
EOF
	echo "$run"
	echo 'echo "netkit-vm: exit $status"'
	echo 'poweroff -f'
} >"$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1 >"$work/initramfs.gz")

# boot LOG LIMIT QEMU-ARGS...: runs qemu until it exits, and stops it when
# it outlives LIMIT seconds, when its guest says nothing for SILENCE seconds
# or when KVM fails inside it (qemu then pauses the guest instead of exiting).
boot() {
	local log=$1 limit=$2 t=0 size=0 quiet=0
	shift 2
	qemu-system-x86_64 -machine q35 -nic none -nographic -no-reboot -kernel "$vmlinuz" "$@" >"$log" 2>&1 &
	qemu=$!
	while kill -0 "$qemu" 2>/dev/null; do
		if grep -aq 'KVM internal error' "$log"; then
			echo "netkit-vm: KVM failed inside qemu: $(grep -a -m1 'KVM internal error' "$log" | tr -d '\r' | sed 's/.*KVM/KVM/')" >&2
			stop_qemu
			return 1
		fi
		local now
		now=$(stat -c %s "$log")
		if [ "$now" = "$size" ]; then quiet=$((quiet + 1)); else quiet=0 size=$now; fi
		if [ "$t" -ge "$limit" ] || [ "$quiet" -ge "${SILENCE:-600}" ]; then
			echo "netkit-vm: qemu stopped after ${t}s (${quiet}s without guest output)" >&2
			stop_qemu
			return 1
		fi
		sleep 1
		t=$((t + 1))
	done
	wait "$qemu" || true
	qemu=
}
stop_qemu() {
	[ -n "${qemu:-}" ] || return 0
	kill "$qemu" 2>/dev/null || true
	wait "$qemu" 2>/dev/null || true
	qemu=
}
trap 'stop_qemu; rm -rf "$work"' EXIT

# KVM only when a probe boot proves it works: nested KVM on machines of this
# kind may abort qemu at once or fail in the guest's first instructions.
# The probe is a kernel and a shell that says so and powers off: seconds
# with working KVM. Under emulation, one CPU without cmpxchg16b: with two,
# qemu 7.2's multi-threaded emulation now and then crashed the guest kernel
# (in its emulation of cmpxchg16b, and while the kernel patched its own code).
accel=tcg cpu=qemu64,-cx16 cpus=1
if [ -w /dev/kvm ] && [ -z "${NETKIT_VM_TCG:-}" ]; then
	probe=$work/probe
	mkdir -p "$probe/bin"
	cp "$(command -v busybox)" "$probe/bin/busybox"
	ln -s busybox "$probe/bin/sh"
	ln -s busybox "$probe/bin/poweroff"
	printf '#!/bin/sh\necho netkit-vm: probe ok\npoweroff -f\n' >"$probe/init"
	chmod +x "$probe/init"
	(cd "$probe" && find . | cpio -o -H newc --quiet | gzip -1 >"$work/probe.gz")
	if SILENCE=30 boot "$work/probe.log" 60 -accel kvm -cpu host -smp 2 -m 256 -initrd "$work/probe.gz" \
		-append "console=ttyS0 quiet panic=-1" && grep -aq 'netkit-vm: probe ok' "$work/probe.log"; then
		accel=kvm cpu=host cpus=2
	else
		echo "netkit-vm: KVM does not work here (probe boot failed); emulating with TCG" >&2
	fi
fi
if [ "$mode" = bench ] && [ "$accel" = tcg ] && [ -z "${NETKIT_VM_BENCH_TCG:-}" ]; then
	echo "netkit-vm: no working KVM here: timings under emulation would mean nothing (NETKIT_VM_BENCH_TCG=1 runs the benchmark anyway, to see that it works)" >&2
	exit 1
fi

log=$work/console.log
# A guest kernel that panics before the tests report is the emulator's
# fault, not the tests': it gets one more boot. So does a KVM that fails
# after its probe passed, under TCG.
for try in 1 2 3; do
	echo "netkit-vm: booting $image ($accel, $cpus CPUs) for the $mode"
	boot "$log" 1500 -accel "$accel" -cpu "$cpu" -smp "$cpus" -m 3072 -initrd "$work/initramfs.gz" \
		-append "console=ttyS0 quiet panic=-1" || true
	if [ "$accel" = kvm ] && grep -aq 'KVM internal error' "$log"; then
		echo "netkit-vm: KVM failed after its probe passed; emulating with TCG" >&2
		accel=tcg cpu=qemu64,-cx16 cpus=1
		continue
	fi
	if grep -q 'netkit-vm: exit' "$log" || ! grep -q 'Kernel panic' "$log"; then
		break
	fi
	[ "$try" = 3 ] || echo "netkit-vm: the guest kernel panicked before the tests reported; booting again" >&2
done
# The console log from the test binary's first line on, without the
# terminal escapes of the firmware.
sed -n '/netkit-vm: Linux version/,$p' "$log" | tr -d '\r' | sed 's/^.*\(netkit-vm: Linux version\)/\1/'
status=$(sed -n 's/.*netkit-vm: exit \([0-9]*\).*/\1/p' "$log" | tr -d '\r' | tail -1)
if [ -z "$status" ]; then
	echo "netkit-vm: the $mode did not finish; the console said:" >&2
	tail -40 "$log" >&2
	exit 1
fi
[ "$mode" = test ] || exit "$status"
for test in 'TestPrivilegedConnectivity/native-netkit' 'TestPrivilegedNetkitMode'; do
	grep -q -- "--- PASS: $test " "$log" || {
		echo "netkit-vm: $test did not pass in the VM" >&2
		exit 1
	}
done
exit "$status"
