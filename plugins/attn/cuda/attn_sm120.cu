/* The cuda-sm120 attention plugin's kernels: attn_kern.cuh with this variant's tiles. */
#define SY_ATTN_SM 120
#include "attn_kern.cuh"
