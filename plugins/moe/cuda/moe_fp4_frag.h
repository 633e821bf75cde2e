/*
 * Where the block-scaled FP4 MMA's operands live, for moe_fp4.cu:
 *   mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X
 *       .f32.e2m1.e2m1.f32.ue4m3
 * written as host-and-device functions so that tests/gpu/test_moe_cuda_tiles
 * can hold the kernel's shared-memory addressing (symf_*_load) against the
 * PTX ISA's fragment tables (symf_spec_*) on the host. With g = lane / 4
 * and t = lane % 4 (PTX: groupID, threadID_in_group):
 *
 *  A, 16 x 64 e2m1 (the weight rows, k along a row): four .b32 registers of
 *    eight elements each, lowest nibble first; element i (0..31) is at row g
 *    for 0 <= i < 8 or 16 <= i < 24, else g + 8; k = 8 t + (i & 7), plus 32
 *    when i >= 16 ("Matrix Fragments for mma.m16n8k64", .e2m1).
 *  B, 64 x 8 e2m1 (the assignment rows, k down a column): two .b32
 *    registers; element i at k = 8 t + (i & 7) (+ 32 when i >= 8), column g.
 *  C / D, 16 x 8 F32: c_i at row g + 8 (i >= 2), column 2 t + (i & 1), as
 *    every m16n8 shape.
 *  scale_A, 16 x 4 ue4m3 (.scale_vec::4X: one scale per 16 k of a row): one
 *    .b32 per thread, byte j the scale of k 16 j .. 16 j + 15; with
 *    thread-id-a = 0 the row-g scales come from the quad's threads t = 0 and
 *    row g + 8's from t = 1 (CUTLASS's SM120 SFALayout, (2,2,8):(8,0,1),
 *    read to confirm, not copied). The kernel has t = 2 and 3 hold the same
 *    rows as t = 0 and 1, so either reading of the selector gets the scales.
 *  scale_B, 4 x 8 ue4m3: byte j of every thread of quad g is column g's
 *    scale of k block j (SFBLayout (4,8):(0,1): all four threads alike), so
 *    thread-id-b = 0 holds whatever the selector picks.
 *  byte-id-a = byte-id-b = 0: with 4X all four bytes are used.
 *
 * Nibble order: a .b32 holds element 8 r + n at bits 4 n .. 4 n + 3, and
 * the NVFP4 rows of the checkpoints (and syf_quant_row's) hold element 2 i
 * in the low nibble of byte i, so one little-endian 32-bit load of four
 * consecutive code bytes is one register.
 */
#ifndef SY_MOE_FP4_FRAG_H
#define SY_MOE_FP4_FRAG_H

#ifdef __CUDACC__
#define SYMF_FN static __host__ __device__ __forceinline__
#else
#define SYMF_FN static inline
#endif

/* ---- the PTX ISA's tables, transcribed: what a lane holds */

/* A's element i (0..31) of lane: its row (0..15) and k (0..63). */
SYMF_FN void symf_spec_a(int lane, int i, int *row, int *k)
{
    const int g = lane >> 2, t = lane % 4;
    *row = (i < 8 || (i >= 16 && i < 24)) ? g : g + 8;
    *k = i < 16 ? t * 8 + (i & 7) : t * 8 + (i & 7) + 32;
}

/* B's element i (0..15) of lane: its k (0..63) and column (0..7). */
SYMF_FN void symf_spec_b(int lane, int i, int *k, int *col)
{
    const int g = lane >> 2, t = lane % 4;
    *k = i < 8 ? t * 8 + (i & 7) : t * 8 + (i & 7) + 32;
    *col = g;
}

/* C/D's element i (0..3) of lane: row (0..15), column (0..7). */
SYMF_FN void symf_spec_c(int lane, int i, int *row, int *col)
{
    const int g = lane >> 2, t = lane % 4;
    *row = i < 2 ? g : g + 8;
    *col = t * 2 + (i & 1);
}

/* ---- the kernel's addressing: where it loads a lane's registers from */

/*
 * Register r (0..3) of A: the tile row and the byte offset in that row's 32
 * code bytes of the k64 step (four bytes = eight elements from there).
 */
SYMF_FN void symf_a_load(int lane, int r, int *row, int *byte)
{
    *row = (lane >> 2) + 8 * (r & 1);
    *byte = 4 * (lane % 4) + 16 * (r >> 1);
}

/* Register r (0..1) of B: the tile column (assignment row) and byte offset in its 32 code bytes. */
SYMF_FN void symf_b_load(int lane, int r, int *col, int *byte)
{
    *col = lane >> 2;
    *byte = 4 * (lane % 4) + 16 * r;
}

/* The row whose four scales (one 32-bit word, k block j in byte j) lane passes as scale-a-data. */
SYMF_FN int symf_sfa_row(int lane)
{
    return (lane >> 2) + 8 * (lane & 1);
}

/* The column whose four scales lane passes as scale-b-data. */
SYMF_FN int symf_sfb_col(int lane)
{
    return lane >> 2;
}

/*
 * The MXFP4 form, for moe_fp4.cu's MX tiles:
 *   mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X
 *       .f32.e2m1.e2m1.f32.ue8m0
 * takes A, B, C / D in the same registers as above and the same threads'
 * scale words (symf_sfa_row, symf_sfb_col); .scale_vec::2X gives each row
 * (column) two ue8m0 scales of 32 k each, and byte-id = 0 picks bytes 0 and
 * 1 of the word: byte j scales k 32 j .. 32 j + 31. vec below is 4 (the
 * ue4m3 form, 16 k a scale) or 2 (this one, 32 k a scale).
 */

/* The PTX table: the first k (0..63) of the m16n8k64 step that scale byte b (0 .. vec - 1) of a word scales. */
SYMF_FN int symf_spec_sf_k(int vec, int b)
{
    return b * (64 / vec);
}

/*
 * The kernel's staging: the byte of a row's staged scales (word s = the
 * slice's k64 step s) where the slice's scale block j (64 / vec k each)
 * goes.
 */
SYMF_FN int symf_sf_slot(int vec, int j)
{
    return 4 * (j / vec) + j % vec;
}

/* Where accumulator i of lane goes: tile row (the output column) and tile column (the assignment row). */
SYMF_FN void symf_c_store(int lane, int i, int *row, int *col)
{
    *row = (lane >> 2) + 8 * (i >> 1);
    *col = 2 * (lane % 4) + (i & 1);
}

#endif
