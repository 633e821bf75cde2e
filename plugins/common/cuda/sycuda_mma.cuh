/*
 * The bf16 tensor-core product both the MoE tiles and the prefill
 * attention kernel build on. m16n8k16 fragments, per lane l (g = l / 4,
 * t = l % 4), two bf16 per register, lower k in the low half:
 *   A: a0 (row g, k 2t..2t+1), a1 (row g+8, same k), a2 (row g, k 2t+8..),
 *      a3 (row g+8, k 2t+8..);  B: b0 (col g, k 2t..2t+1), b1 (col g, k 2t+8..);
 *   D: d0 (row g, col 2t), d1 (g, 2t+1), d2 (g+8, 2t), d3 (g+8, 2t+1).
 */
#ifndef SY_SYCUDA_MMA_CUH
#define SY_SYCUDA_MMA_CUH

#include <stdint.h>

/* D += A B, bf16 in, F32 accumulate; sm_80 and newer (compiles to nothing below, where no caller launches it). */
__device__ __forceinline__ void syc_mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

#endif
