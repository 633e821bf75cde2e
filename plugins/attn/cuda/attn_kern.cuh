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
 *
 * Prefill rows (a sequence with SYAT_TC_MIN_TOKENS new tokens or more, when
 * the glue has checked k_attend_tc on this GPU) go to k_attend_tc instead:
 * one block per tile of 64 (token, query head) rows of one sequence and one
 * KV head, four warps of 16 rows, walking the tile's KV positions once for
 * all its rows with mma.sync m16n8k16 on bf16 hi + lo splits (attn_plan.h
 * has its fragment maps, masks and bound). The glue's plan (syat_plan)
 * gives every row to exactly one of the two kernels.
 */
#include <math.h>
#include <stdint.h>

#include "attn_kern.h"
#include "attn_plan.h"
#include "attn_tiles.h"
#include "sycuda_conv.cuh"
#include "sycuda_mma.cuh"

#ifdef SY_SMEM_QUERY
/* Read by the build rule and tools/check-cuda-smem.sh: this object's largest dynamic shared memory per block,
 * then the tensor-core kernel's own (kernels whose name holds k_attend_tc). */
sy_dyn_smem SY_ATTN_SMEM_MAX; k_attend_tc: SY_ATTN_TC_SMEM_MAX
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

    const int t = p.rows ? p.rows[blockIdx.x] : (int)blockIdx.x;
    const int kvh = blockIdx.y, split = blockIdx.z, tid = threadIdx.x, nth = blockDim.x;
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
        float inv = 1.0f / ssum[g];
        if (p.sinks) { /* rescaled to the larger of the row's max and the sink: neither exp overflows */
            const float sk = p.sinks[kvh * G + g], m = fmaxf(smax[g], sk), a = expf(smax[g] - m);
            inv = a / (ssum[g] * a + expf(sk - m));
        }
        p.out[(int64_t)t * p.ldo + ((int64_t)kvh * G + g) * DV + d] = so[i] * inv;
    }
}

/* One block per (token, query head): rescales each split to the common max, in split order. */
__global__ void k_combine(syat_params p)
{
    const int t = p.rows ? p.rows[blockIdx.x] : (int)blockIdx.x;
    const int h = blockIdx.y, DV = p.v_head_dim, NS = p.n_splits;
    const float *part = p.part + ((int64_t)t * gridDim.y + h) * NS * (DV + 2);
    float mx = -INFINITY;
    for (int i = 0; i < NS; i++)
        mx = fmaxf(mx, part[(int64_t)i * (DV + 2) + DV]);
    if (p.sinks) /* the sink's term joins the sum once, scaled like the splits */
        mx = fmaxf(mx, p.sinks[h]);
    float sum = p.sinks ? expf(p.sinks[h] - mx) : 0.0f;
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

/* ------------------------------------------------ tensor-core prefill */

/* x as bf16 hi + lo (moe_tc.cuh's symk_split): hi + lo keeps 16 of x's 24 bits; a non-finite x gets lo = 0. */
__device__ __forceinline__ void syat_split(float x, uint16_t *hi, uint16_t *lo)
{
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    *hi = __bfloat16_as_ushort(h);
    *lo = isfinite(x) ? __bfloat16_as_ushort(__float2bfloat16_rn(x - __bfloat162float(h))) : (uint16_t)0;
}

/* Two bf16 as one register, a (the lower k) in the low half: the operand order of mma's fragments. */
__device__ __forceinline__ uint32_t syat_pack(uint16_t a, uint16_t b)
{
    return (uint32_t)a | (uint32_t)b << 16;
}

/* Two consecutive bf16 of a shared-memory row (even index, rows a multiple of 4 bytes apart) as one register. */
__device__ __forceinline__ uint32_t syat_ld_pair(const uint16_t *p)
{
    return *reinterpret_cast<const uint32_t *>(p);
}

/*
 * One tile: rows r = 0 .. 63 are (token t0 + r / G, query head kvh * G +
 * r % G), rows past nt * G idle. Per KV tile of TILE positions the block
 * stages K (row-major) and V (transposed, so a B fragment's pair of keys is
 * one load) as bf16 hi + lo; each warp computes S = Q K^T for its 16 rows
 * (hi x lo + lo x hi + hi x hi; the K lo products skipped for a BF16
 * cache, whose lo is 0), masks positions a row does not see (causal,
 * window: syat_row_sees), runs k_attend's online softmax in F32 registers
 * (the 4 lanes of a row reduce with shuffles) and accumulates O += P V
 * with P taken from S's registers (syat_p_ntile / syat_p_elem), split the
 * same way. The softmax scale is folded into q, as in k_attend.
 */
template <int D>
__global__ void __launch_bounds__(SYAT_TC_WARPS * 32) k_attend_tc(syat_params p)
{
    constexpr int TILE = SY_ATTN_TC_KV_TILE, NR = SYAT_TC_ROWS, NTH = SYAT_TC_WARPS * 32;
    constexpr int LD = D + 8, LDV = TILE + 8, NS = TILE / 8, NO = D / 8;
    static_assert(TILE % 16 == 0 && D % 16 == 0, "the tiles split into m16n8k16 pieces");
    extern __shared__ __align__(16) unsigned char smem[];
    int64_t *soff = (int64_t *)smem;
    uint16_t *qh = (uint16_t *)(soff + TILE), *ql = qh + NR * LD;
    uint16_t *kh = ql + NR * LD, *kl = kh + TILE * LD;
    uint16_t *vh = kl + TILE * LD, *vl = vh + D * LDV;

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, kvh = blockIdx.y, G = p.group;
    const int32_t *seq_of = p.meta, *tok_start = seq_of + p.n_tokens, *ctx_len = tok_start + p.n_seqs + 1;
    const int32_t *bt = ctx_len + p.n_seqs;
    const int t0 = p.tiles[2 * blockIdx.x], nt = p.tiles[2 * blockIdx.x + 1];
    const int s = seq_of[t0];
    const int64_t pos0 = (int64_t)ctx_len[s] + (t0 - tok_start[s]);
    const int32_t *seq_bt = bt + (int64_t)s * p.max_blocks;
    const int used = nt * G;
    int64_t lo, hi;
    syat_tile_kv_range(pos0, nt, p.window, &lo, &hi);
    const bool split_kv = p.kvt != SYC_BF16;

    for (int i = tid; i < NR * D; i += NTH) {
        const int r = i / D, d = i % D;
        const float x =
            r < used ? p.q[(int64_t)(t0 + r / G) * p.ldq + ((int64_t)kvh * G + r % G) * D + d] * p.scale : 0.0f;
        syat_split(x, &qh[r * LD + d], &ql[r * LD + d]);
    }
    /* This lane's two rows (accumulator rows g and g + 8 of the warp's 16), and the positions the warp sees. */
    const int wr = warp * 16, r0 = wr + syat_frag_c_row(lane, 0), r1 = wr + syat_frag_c_row(lane, 2);
    const bool warp_live = wr < used;
    const int wlast = wr + 15 < used - 1 ? wr + 15 : used - 1;
    const int64_t wlo = syat_visible_lo(pos0 + wr / G, p.window), whi = pos0 + wlast / G;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[NO][4];
    #pragma unroll
    for (int n = 0; n < NO; n++)
        #pragma unroll
        for (int c = 0; c < 4; c++)
            o[n][c] = 0.0f;

    for (int64_t j0 = lo; j0 <= hi; j0 += TILE) {
        const int nv = (int)(hi + 1 - j0 < TILE ? hi + 1 - j0 : TILE);
        __syncthreads(); /* the previous tile's K and V are read */
        for (int jj = tid; jj < nv; jj += NTH) {
            const int64_t q = j0 + jj;
            soff[jj] = cache_row(p, kvh, seq_bt[q / p.block_size], (int)(q % p.block_size));
        }
        __syncthreads();
        for (int i = tid; i < TILE * D; i += NTH) {
            const int jj = i / D, d = i % D;
            const float x = jj < nv ? syc_load(p.kc, p.kvt, soff[jj] * D + d) : 0.0f;
            const float y = jj < nv ? syc_load(p.vc, p.kvt, soff[jj] * D + d) : 0.0f;
            syat_split(x, &kh[jj * LD + d], &kl[jj * LD + d]);
            syat_split(y, &vh[d * LDV + jj], &vl[d * LDV + jj]);
        }
        __syncthreads();
        if (!warp_live || j0 > whi || j0 + nv - 1 < wlo) /* no row of this warp sees these positions */
            continue;

        float sc[NS][4];
        #pragma unroll
        for (int j = 0; j < NS; j++)
            #pragma unroll
            for (int c = 0; c < 4; c++)
                sc[j][c] = 0.0f;
        #pragma unroll
        for (int kk = 0; kk < D; kk += 16) {
            uint32_t ah[4], al[4];
            #pragma unroll
            for (int r = 0; r < 4; r++) {
                const int at = (wr + syat_frag_a_row(lane, 2 * r)) * LD + kk + syat_frag_a_col(lane, 2 * r);
                ah[r] = syat_ld_pair(&qh[at]);
                al[r] = syat_ld_pair(&ql[at]);
            }
            #pragma unroll
            for (int j = 0; j < NS; j++) {
                const int at = (8 * j + syat_frag_b_col(lane)) * LD + kk;
                const int b0 = at + syat_frag_b_row(lane, 0), b1 = at + syat_frag_b_row(lane, 2);
                if (split_kv) /* the small products first */
                    syc_mma_bf16(sc[j], ah, syat_ld_pair(&kl[b0]), syat_ld_pair(&kl[b1]));
                syc_mma_bf16(sc[j], al, syat_ld_pair(&kh[b0]), syat_ld_pair(&kh[b1]));
                syc_mma_bf16(sc[j], ah, syat_ld_pair(&kh[b0]), syat_ld_pair(&kh[b1]));
            }
        }
        /* Mask, then k_attend's online softmax per row: the tile's max, exp, the running sum rescaled. */
        float mx[2] = {m[0], m[1]};
        #pragma unroll
        for (int j = 0; j < NS; j++)
            #pragma unroll
            for (int c = 0; c < 4; c++) {
                const int jj = 8 * j + syat_frag_c_col(lane, c), r = c < 2 ? r0 : r1;
                if (jj >= nv || r >= used || !syat_row_sees(pos0, G, r, p.window, j0 + jj))
                    sc[j][c] = -INFINITY;
                mx[c >> 1] = fmaxf(mx[c >> 1], sc[j][c]);
            }
        float alpha[2], psum[2] = {0.0f, 0.0f};
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            alpha[h] = m[h] == -INFINITY ? 0.0f : expf(m[h] - mx[h]);
        }
        #pragma unroll
        for (int j = 0; j < NS; j++)
            #pragma unroll
            for (int c = 0; c < 4; c++) {
                const float e = sc[j][c] == -INFINITY ? 0.0f : expf(sc[j][c] - mx[c >> 1]);
                sc[j][c] = e;
                psum[c >> 1] += e;
            }
        #pragma unroll
        for (int h = 0; h < 2; h++) {
            l[h] = l[h] * alpha[h] + psum[h]; /* this lane's columns; the row's lanes add theirs at the end */
            m[h] = mx[h];
        }
        #pragma unroll
        for (int n = 0; n < NO; n++)
            #pragma unroll
            for (int c = 0; c < 4; c++)
                o[n][c] *= alpha[c >> 1];
        #pragma unroll
        for (int kk = 0; kk < TILE / 16; kk++) {
            uint32_t ph[4], pl[4];
            #pragma unroll
            for (int r = 0; r < 4; r++) {
                uint16_t h0, l0, h1, l1;
                syat_split(sc[2 * kk + syat_p_ntile(2 * r)][syat_p_elem(2 * r)], &h0, &l0);
                syat_split(sc[2 * kk + syat_p_ntile(2 * r + 1)][syat_p_elem(2 * r + 1)], &h1, &l1);
                ph[r] = syat_pack(h0, h1);
                pl[r] = syat_pack(l0, l1);
            }
            #pragma unroll
            for (int n = 0; n < NO; n++) {
                const int at = (8 * n + syat_frag_b_col(lane)) * LDV + 16 * kk;
                const int b0 = at + syat_frag_b_row(lane, 0), b1 = at + syat_frag_b_row(lane, 2);
                if (split_kv)
                    syc_mma_bf16(o[n], ph, syat_ld_pair(&vl[b0]), syat_ld_pair(&vl[b1]));
                syc_mma_bf16(o[n], pl, syat_ld_pair(&vh[b0]), syat_ld_pair(&vh[b1]));
                syc_mma_bf16(o[n], ph, syat_ld_pair(&vh[b0]), syat_ld_pair(&vh[b1]));
            }
        }
    }
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
    #pragma unroll
    for (int n = 0; n < NO; n++)
        #pragma unroll
        for (int c = 0; c < 4; c++) {
            const int r = c < 2 ? r0 : r1;
            if (r < used)
                p.out[(int64_t)(t0 + r / G) * p.ldo + ((int64_t)kvh * G + r % G) * D + 8 * n + syat_frag_c_col(lane, c)] =
                    o[n][c] / l[c >> 1];
        }
}

/* Launches k_attend_tc<D>, opting in to its shared memory once per instance (bit per D in *opted); -1 if refused. */
template <int D>
static int launch_tc(const syat_params *p, int *opted, int bit)
{
    const int bytes = SY_ATTN_TC_SMEM_BYTES(D, SY_ATTN_TC_KV_TILE);
    if (bytes > 48 * 1024 && !(*opted & bit)) {
        if (cudaFuncSetAttribute(k_attend_tc<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess)
            return -1;
        *opted |= bit;
    }
    k_attend_tc<D><<<dim3((unsigned)p->n_tiles, (unsigned)p->n_kv_heads), SYAT_TC_WARPS * 32, (size_t)bytes>>>(*p);
    return 0;
}

extern "C" int syat_forward(const syat_params *p, int *smem_opted_in, int *tc_opted_in)
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
    const int splits = p->n_splits > 1 ? p->n_splits : 1, n_att = p->rows ? p->n_rows : p->n_tokens;
    if (n_att > 0) {
        k_attend<<<dim3((unsigned)n_att, (unsigned)p->n_kv_heads, (unsigned)splits), SY_ATTN_THREADS,
                   (size_t)bytes>>>(*p);
        if (splits > 1)
            k_combine<<<dim3((unsigned)n_att, (unsigned)(p->n_kv_heads * p->group)), 128>>>(*p);
    }
    if (p->n_tiles > 0) {
        const int rc = p->head_dim == 64 ? launch_tc<64>(p, tc_opted_in, 1)
                       : p->head_dim == 128 ? launch_tc<128>(p, tc_opted_in, 2)
                                            : -1; /* the glue sends no tiles then (syat_tc_fits) */
        if (rc < 0)
            return -1;
    }
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
