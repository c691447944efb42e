#!/usr/bin/env bash
# Runs the datapath's tests (go test ./internal/datapath: BPF programs and
# the privileged netns tests, their netkit variants included) and the
# agent's netkit mode (its cells and cilium-cni through libcni) on a kernel
# that has netkit pod devices, for machines whose own kernel lacks them:
# Debian's backports cloud kernel (6.12, CONFIG_NETKIT=y) booted by qemu,
# under software emulation when there is no /dev/kvm, with an initramfs of
# busybox, the kernel modules the tests load and static test binaries.
#
# On a kernel with netkit there is nothing to do: the tests of `make test`
# ran the netkit variants already. The machine's apt configuration is left
# alone (the kernel package is fetched with a private sources list), and
# the kernel package stays cached in .cache/netkit-vm. The exit status is
# the tests'.
set -euo pipefail
cd "$(dirname "$0")/.."

if unshare --net ip link add nk0 type netkit 2>/dev/null; then
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
CGO_ENABLED=0 go test -c -o "$root/bin/datapath.test" ./internal/datapath
CGO_ENABLED=0 go test -c -o "$root/bin/agent.test" ./cmd/cilium-agent
CGO_ENABLED=0 go build -o "$root/bin/cilium-cni" ./cmd/cilium-cni
cat >"$root/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mount -t bpf bpf /sys/fs/bpf
for m in $(cat /mod/order); do insmod /mod/$m.ko || echo "netkit-vm: insmod $m failed"; done
ip link set lo up
echo "netkit-vm: $(cat /proc/version)"
cd /tmp
/bin/datapath.test -test.count=1 -test.v $(sed -n 's/.*testargs=\([^ ]*\).*/\1/p' /proc/cmdline | tr ',' ' ')
status=$?
# The agent's netkit mode end to end: its cells, cilium-cni through libcni.
CILIUM_CNI_BIN=/bin/cilium-cni /bin/agent.test -test.count=1 -test.v -test.run 'TestPrivilegedNetkitMode$' || status=1
echo "netkit-vm: exit $status"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1 >"$work/initramfs.gz")

# Under emulation, one CPU without cmpxchg16b: with two, qemu 7.2's
# multi-threaded emulation now and then crashed the guest kernel (in its
# emulation of cmpxchg16b, and while the kernel patched its own code).
accel=tcg cpu=qemu64,-cx16 cpus=1
[ -w /dev/kvm ] && accel=kvm cpu=host cpus=2
log=$work/console.log
# A guest kernel that panics before the tests report is the emulator's
# fault, not the tests': it gets one more boot.
for boot in 1 2; do
	echo "netkit-vm: booting $image ($accel) with the datapath tests"
	timeout 1200 qemu-system-x86_64 -machine q35 -accel "$accel" -cpu "$cpu" -smp "$cpus" -m 3072 -nic none \
		-nographic -no-reboot -kernel "$vmlinuz" -initrd "$work/initramfs.gz" \
		-append "console=ttyS0 quiet panic=-1 testargs=${NETKIT_VM_TESTARGS:-}" >"$log" 2>&1 || true
	if grep -q 'netkit-vm: exit' "$log" || ! grep -q 'Kernel panic' "$log"; then
		break
	fi
	[ "$boot" = 2 ] || echo "netkit-vm: the guest kernel panicked before the tests reported; booting again" >&2
done
# The console log from the test binary's first line on, without the
# terminal escapes of the firmware.
sed -n '/netkit-vm: Linux version/,$p' "$log" | tr -d '\r' | sed 's/^.*\(netkit-vm: Linux version\)/\1/'
status=$(sed -n 's/.*netkit-vm: exit \([0-9]*\).*/\1/p' "$log" | tr -d '\r' | tail -1)
if [ -z "$status" ]; then
	echo "netkit-vm: the tests did not finish; the console said:" >&2
	tail -40 "$log" >&2
	exit 1
fi
for test in 'TestPrivilegedConnectivity/native-netkit' 'TestPrivilegedNetkitMode'; do
	grep -q -- "--- PASS: $test " "$log" || {
		echo "netkit-vm: $test did not pass in the VM" >&2
		exit 1
	}
done
exit "$status"
