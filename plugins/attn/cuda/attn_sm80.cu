/* The cuda-sm80 attention plugin's kernels: attn_kern.cuh with this variant's tiles. */
#define SY_ATTN_SM 80
#include "attn_kern.cuh"
