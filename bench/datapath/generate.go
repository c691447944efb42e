package main

//go:generate go tool bpf2go -cc clang-14 -strip llvm-strip-14 -target bpfel -cflags "-O2 -mcpu=v3 -Wall -Werror -I../../bpf/include" -no-global-types floor ../../bpf/bench/veth_floor.c
