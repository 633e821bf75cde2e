/*
 * Paged attention on the GPU, compiled once per variant (attn_sm80.cu,
 * attn_sm90.cu, attn_sm120.cu set SY_ATTN_SM; attn_tiles.h picks the tile).
 *
 * k_cache_write puts every new k/v row into its cache slot first (one block
 * per token and KV head); then k_attend gives one block to each (query
 * token, KV head): it holds the group's query rows and walks the token's
 * visible positions (causal, sliding window) SY_ATTN_KV_TILE at a time,
 * staging K and V rows through shared memory, with an online softmax per
 * query head and F32 accumulation. Prefill and decode rows mix freely.
 *
 * A decode step at small batch would run only n_tokens x n_kv_heads blocks
 * (8 on a 132-SM H200 for one Llama-3-8B sequence), each walking the whole
 * context: so when the glue asks for it (n_splits > 1), the context is cut
 * into splits of split_len positions, one block each, which leave their
 * unnormalised output, running max and sum in `part`, and k_combine merges
 * them (flash-decoding). The split count depends on the batch, so on the GPU
 * a token's result may differ in the last bits with the batch around it.
 */
#include <math.h>
#include <stdint.h>

#include "attn_kern.h"
#include "attn_tiles.h"
#include "sycuda_conv.cuh"

#ifdef SY_SMEM_QUERY
/* Read by the build rule and tools/check-cuda-smem.sh: this object's largest dynamic shared memory per block. */
sy_dyn_smem SY_ATTN_SMEM_MAX
#endif

static __device__ __forceinline__ int64_t cache_row(const syat_params &p, int kvh, int32_t block, int slot)
{
    return (((int64_t)p.layer * p.n_kv_heads + kvh) * p.n_blocks + block) * p.block_size + slot;
}

__global__ void k_cache_write(syat_params p)
{
    const int t = blockIdx.x, kvh = blockIdx.y;
    const int32_t *seq_of = p.meta, *tok_start = seq_of + p.n_tokens, *ctx_len = tok_start + p.n_seqs + 1;
    const int32_t *bt = ctx_len + p.n_seqs;
    const int s = seq_of[t];
    const int64_t pos = (int64_t)ctx_len[s] + (t - tok_start[s]);
    const int32_t blk = bt[(int64_t)s * p.max_blocks + pos / p.block_size];
    const int64_t row = cache_row(p, kvh, blk, (int)(pos % p.block_size));
    for (int d = threadIdx.x; d < p.head_dim; d += blockDim.x)
        syc_store(p.kc, p.kvt, row * p.head_dim + d, p.k[(int64_t)t * p.ldk + (int64_t)kvh * p.head_dim + d]);
    for (int d = threadIdx.x; d < p.v_head_dim; d += blockDim.x)
        syc_store(p.vc, p.kvt, row * p.v_head_dim + d, p.v[(int64_t)t * p.ldv + (int64_t)kvh * p.v_head_dim + d]);
}

__global__ void __launch_bounds__(SY_ATTN_THREADS) k_attend(syat_params p)
{
    extern __shared__ __align__(16) unsigned char smem[];
    const int G = p.group, D = p.head_dim, DV = p.v_head_dim, TILE = SY_ATTN_KV_TILE;
    int64_t *soff = (int64_t *)smem;
    float *sq = (float *)(soff + TILE);
    float *sk = sq + G * D;
    float *sv = sk + TILE * D;
    float *ss = sv + TILE * DV;
    float *so = ss + G * TILE;
    float *smax = so + G * DV;
    float *ssum = smax + G;
    float *salpha = ssum + G;

    const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z, tid = threadIdx.x, nth = blockDim.x;
    const int32_t *seq_of = p.meta, *tok_start = seq_of + p.n_tokens, *ctx_len = tok_start + p.n_seqs + 1;
    const int32_t *bt = ctx_len + p.n_seqs;
    const int s = seq_of[t];
    int64_t pos = (int64_t)ctx_len[s] + (t - tok_start[s]);
    int64_t lo = p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
    const int32_t *seq_bt = bt + (int64_t)s * p.max_blocks;
    if (p.n_splits > 1) { /* this block's share of the visible positions; it may be empty */
        const int64_t s0 = (int64_t)split * p.split_len, s1 = s0 + p.split_len - 1;
        lo = lo > s0 ? lo : s0;
        pos = pos < s1 ? pos : s1;
    }

    /* The softmax scale is folded into q, as on the CPU. */
    for (int i = tid; i < G * D; i += nth) {
        const int g = i / D, d = i % D;
        sq[i] = p.q[(int64_t)t * p.ldq + ((int64_t)kvh * G + g) * D + d] * p.scale;
    }
    for (int i = tid; i < G * DV; i += nth)
        so[i] = 0.0f;
    for (int g = tid; g < G; g += nth) {
        smax[g] = -INFINITY;
        ssum[g] = 0.0f;
    }

    for (int64_t j0 = lo; j0 <= pos; j0 += TILE) {
        const int nv = (int)(pos + 1 - j0 < TILE ? pos + 1 - j0 : TILE);
        for (int jj = tid; jj < nv; jj += nth) {
            const int64_t q = j0 + jj;
            soff[jj] = cache_row(p, kvh, seq_bt[q / p.block_size], (int)(q % p.block_size));
        }
        __syncthreads();
        for (int i = tid; i < nv * D; i += nth)
            sk[i] = syc_load(p.kc, p.kvt, soff[i / D] * D + i % D);
        for (int i = tid; i < nv * DV; i += nth)
            sv[i] = syc_load(p.vc, p.kvt, soff[i / DV] * DV + i % DV);
        __syncthreads();
        /* Every staged position is visible to this token: no mask inside a tile. */
        for (int i = tid; i < G * nv; i += nth) {
            const int g = i / nv, jj = i % nv;
            const float *qa = sq + g * D, *ka = sk + jj * D;
            float acc = 0.0f;
            for (int d = 0; d < D; d++)
                acc = fmaf(qa[d], ka[d], acc);
            ss[g * TILE + jj] = acc;
        }
        __syncthreads();
        /* Online softmax: one warp per query head. */
        const int warp = tid / 32, lane = tid % 32, nw = nth / 32;
        for (int g = warp; g < G; g += nw) {
            float mx = smax[g];
            for (int jj = lane; jj < nv; jj += 32)
                mx = fmaxf(mx, ss[g * TILE + jj]);
            for (int o = 16; o > 0; o >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            float sum = 0.0f;
            for (int jj = lane; jj < nv; jj += 32) {
                const float e = expf(ss[g * TILE + jj] - mx);
                ss[g * TILE + jj] = e;
                sum += e;
            }
            for (int o = 16; o > 0; o >>= 1)
                sum += __shfl_xor_sync(0xffffffffu, sum, o);
            if (lane == 0) {
                const float alpha = smax[g] == -INFINITY ? 0.0f : expf(smax[g] - mx);
                salpha[g] = alpha;
                ssum[g] = ssum[g] * alpha + sum;
                smax[g] = mx;
            }
        }
        __syncthreads();
        for (int i = tid; i < G * DV; i += nth) {
            const int g = i / DV, d = i % DV;
            float acc = so[i] * salpha[g];
            const float *pr = ss + g * TILE;
            for (int jj = 0; jj < nv; jj++)
                acc = fmaf(pr[jj], sv[jj * DV + d], acc);
            so[i] = acc;
        }
        __syncthreads();
    }
    if (p.n_splits > 1) {
        float *part = p.part + ((int64_t)t * p.n_kv_heads * G + (int64_t)kvh * G) * p.n_splits * (DV + 2);
        for (int i = tid; i < G * DV; i += nth) {
            const int g = i / DV, d = i % DV;
            part[((int64_t)g * p.n_splits + split) * (DV + 2) + d] = so[i];
        }
        for (int g = tid; g < G; g += nth) {
            part[((int64_t)g * p.n_splits + split) * (DV + 2) + DV] = smax[g];
            part[((int64_t)g * p.n_splits + split) * (DV + 2) + DV + 1] = ssum[g];
        }
        return;
    }
    for (int i = tid; i < G * DV; i += nth) {
        const int g = i / DV, d = i % DV;
        p.out[(int64_t)t * p.ldo + ((int64_t)kvh * G + g) * DV + d] = so[i] / ssum[g];
    }
}

/* One block per (token, query head): rescales each split to the common max, in split order. */
__global__ void k_combine(syat_params p)
{
    const int t = blockIdx.x, h = blockIdx.y, DV = p.v_head_dim, NS = p.n_splits;
    const float *part = p.part + ((int64_t)t * gridDim.y + h) * NS * (DV + 2);
    float mx = -INFINITY;
    for (int i = 0; i < NS; i++)
        mx = fmaxf(mx, part[(int64_t)i * (DV + 2) + DV]);
    float sum = 0.0f;
    for (int i = 0; i < NS; i++) {
        const float m = part[(int64_t)i * (DV + 2) + DV];
        if (m != -INFINITY) /* an empty split: no visible position */
            sum += part[(int64_t)i * (DV + 2) + DV + 1] * expf(m - mx);
    }
    for (int d = threadIdx.x; d < DV; d += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < NS; i++) {
            const float m = part[(int64_t)i * (DV + 2) + DV];
            if (m != -INFINITY)
                acc = fmaf(part[(int64_t)i * (DV + 2) + d], expf(m - mx), acc);
        }
        p.out[(int64_t)t * p.ldo + (int64_t)h * DV + d] = acc / sum;
    }
}

extern "C" int syat_forward(const syat_params *p, int *smem_opted_in)
{
    if (p->n_tokens <= 0)
        return 0;
    const dim3 grid((unsigned)p->n_tokens, (unsigned)p->n_kv_heads);
    k_cache_write<<<grid, 128>>>(*p);
    const int bytes = SY_ATTN_SMEM_BYTES(p->group, p->head_dim, p->v_head_dim, SY_ATTN_KV_TILE);
    /* Over 48 KB a kernel must opt in; once per instance and size. */
    if (bytes > 48 * 1024 && bytes > *smem_opted_in) {
        if (cudaFuncSetAttribute(k_attend, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess)
            return -1;
        *smem_opted_in = bytes;
    }
    const int splits = p->n_splits > 1 ? p->n_splits : 1;
    k_attend<<<dim3((unsigned)p->n_tokens, (unsigned)p->n_kv_heads, (unsigned)splits), SY_ATTN_THREADS,
               (size_t)bytes>>>(*p);
    if (splits > 1)
        k_combine<<<dim3((unsigned)p->n_tokens, (unsigned)(p->n_kv_heads * p->group)), 128>>>(*p);
    return bytes;
}

__global__ void k_copy_tiles(unsigned char *c, int64_t tile_bytes, int n_blocks, int32_t src, int32_t dst)
{
    const int64_t h = blockIdx.y;
    const unsigned char *from = c + (h * n_blocks + src) * tile_bytes;
    unsigned char *to = c + (h * n_blocks + dst) * tile_bytes;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < tile_bytes; i += (int64_t)gridDim.x * blockDim.x)
        to[i] = from[i];
}

extern "C" void syat_copy_blocks(void *kc, void *vc, int kvt, const int32_t *pairs, int n, int64_t heads,
                                 int n_blocks, int64_t k_tile, int64_t v_tile)
{
    const int64_t es = kvt == SYC_F32 ? 4 : 2;
    /* One launch per pair, in order: a later pair may read what an earlier one wrote. */
    for (int i = 0; i < n; i++) {
        if (pairs[2 * i] == pairs[2 * i + 1])
            continue;
        const dim3 grid(8, (unsigned)heads);
        k_copy_tiles<<<grid, 256>>>((unsigned char *)kc, k_tile * es, n_blocks, pairs[2 * i], pairs[2 * i + 1]);
        k_copy_tiles<<<grid, 256>>>((unsigned char *)vc, v_tile * es, n_blocks, pairs[2 * i], pairs[2 * i + 1]);
    }
}
