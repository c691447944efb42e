/* Shim: BPF is a 64-bit target. */
#define __BITS_PER_LONG 64
#include <asm-generic/bitsperlong.h>
