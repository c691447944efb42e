package datapath

// The objects are built for little-endian BPF only, with pinned flags, so
// that `make generate` reproduces the committed files byte for byte.
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -target bpfel -cflags "-O2 -mcpu=v3 -Wall -Werror -I../../bpf/include" -type event -type metrics_value -type event_type -type trace_point -type sock_xlate_point -type monitor_aggregation -type drop_reason -type traffic_direction -type policy_verdict -type ct_status -type ct_flags -type endpoint_flags -type policy_flags -type policy_prefix -type routing_mode -type addr_family -type reserved_identity -type lb_scope -type lb_flags -type lb_backend_state -type lb_hairpin -type ct_key_flags -type policy_key -type policy_entry -type l2_responder_key -type l2_responder_entry -type l2_liveness lxc ../../bpf/lxc.c
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -target bpfel -cflags "-O2 -mcpu=v3 -Wall -Werror -I../../bpf/include" -no-global-types node ../../bpf/node.c
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -target bpfel -cflags "-O2 -mcpu=v3 -Wall -Werror -I../../bpf/include" -no-global-types sock ../../bpf/sock.c
//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -target bpfel -cflags "-O2 -mcpu=v3 -Wall -Werror -I../../bpf/include" -no-global-types -output-suffix _test overlaytest ../../bpf/tests/overlay_test.c
