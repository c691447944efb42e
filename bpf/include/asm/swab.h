/* Shim: no arch-specific byte swapping on BPF. */
#include <asm-generic/swab.h>
