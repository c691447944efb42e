/* Shim: bpf2go builds only the little-endian object (bpfel). */
#include <linux/byteorder/little_endian.h>
