/* Shim: generic POSIX types for the BPF target. */
#include <asm-generic/posix_types.h>
