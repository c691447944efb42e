/* Shim: the BPF target has no arch directory of its own; the generic types are exact for it. */
#include <asm-generic/types.h>
