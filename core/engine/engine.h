/*
 * The engine: a loaded model, its tokenizer, the plugin instances chosen by
 * the configuration, the prepared weights, the KV block pool, and one
 * forward step over a batch of sequences.
 *
 * Not thread-safe: one thread drives an engine (the serving loop or the
 * generate command); plugins parallelise inside each op.
 */
#ifndef SY_ENGINE_H
#define SY_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/kv_blocks.h"
#include "model/model.h"
#include "plugin/config.h"
#include "tokenizer/tokenizer.h"

typedef struct sy_engine sy_engine;

/*
 * This process's place in a tensor-parallel group (core/dist launches the
 * ranks). Every rank opens an engine with the same configuration; the comm
 * plugin joins them, each keeps its slice of the weights, rank 0 drives
 * the steps and the others follow (sy_engine_follow).
 */
typedef struct sy_engine_dist {
    int rank;               /* < 0: the launcher says (mpirun, with [comm] plugin = mpi) */
    int world;              /* ranks in the group; <= 0 with rank < 0: the launcher says */
    int local_rank;         /* this rank's place among the ranks of its node (sy_host.local_rank) */
    const char *rendezvous; /* unique per run: the comm plugin's setup() meeting point */
    double timeout_s;       /* bounds the rendezvous, every collective and a follower's wait for a plan */
    const int *plan_fds;    /* rank 0: [world] sockets to the followers (index 0 unused); a follower:
                             * [1] its socket to rank 0; NULL: plans go by the comm plugin's broadcast */
} sy_engine_dist;

typedef struct sy_engine_opts {
    const char *plugin_dirs; /* colon-separated, searched before [plugins] path and the install dir */
    bool progress;           /* report model loading progress on stderr */
    const sy_engine_dist *dist; /* NULL: one process, no tensor parallelism */
} sy_engine_opts;

/*
 * Builds an engine from a configuration: validates the core's sections,
 * loads the plugins (device first, whose worker pool every plugin then
 * shares), the model and tokenizer, sizes the KV pool and prepares weights.
 */
int sy_engine_open(const sy_config *cfg, const sy_engine_opts *opts, sy_engine **out, sy_err *err);
void sy_engine_close(sy_engine *e);

const sy_model_config *sy_engine_model_config(const sy_engine *e);
const sy_tokenizer *sy_engine_tokenizer(const sy_engine *e);
sy_kv_blocks *sy_engine_kv(sy_engine *e);
/* Longest sequence (prompt + output) the engine accepts. */
int32_t sy_engine_max_seq_len(const sy_engine *e);
/* Most tokens one step may carry. */
int32_t sy_engine_max_batch_tokens(const sy_engine *e);
/* Most sequences one step may carry. */
int32_t sy_engine_max_seqs(const sy_engine *e);
/* Most logits rows (or picks) one step may produce: max_seqs, times 1 + num_draft_tokens with [speculative] on. */
int32_t sy_engine_max_logit_rows(const sy_engine *e);
/* "device=cpu attn=cpu moe=cpu comm=local": which plugins were chosen. */
const char *sy_engine_describe(const sy_engine *e);
/* The file of the plugin the engine runs for kind (SY_KIND_DEVICE, _ATTN, _MOE, _COMM); NULL when it has none
 * (no moe plugin for a dense model): a second engine (a draft model) opens the same ones. */
const char *sy_engine_plugin_path(const sy_engine *e, int kind);

/* One sequence's share of a step. */
typedef struct sy_step_seq {
    const int32_t *tokens; /* new tokens */
    int32_t n_tokens;
    int32_t ctx_len;       /* tokens of this sequence already in the KV cache */
    const int32_t *blocks; /* block table covering ctx_len + n_tokens */
    int32_t n_blocks;
    bool want_logits;      /* logits after the last new token */
    /* With want_logits: only the greedy pick (sy_sampler's rule) is needed;
     * the step writes it here instead of a logits row, picking on the device
     * when it can (see sy_engine_device_picks). */
    int32_t *greedy_id;
    /* With greedy_id: the pick is this draw (sy_sampler_row) instead of the
     * greedy one, made on the device when it has the sample op and
     * device_sampling is not off, else on the host with the same uniform;
     * the id equals sy_sampler_next's either way. Not with tensor
     * parallelism (sy_engine_tp_size > 1): leave it NULL there and let such
     * rows come back as logits. */
    const sy_sample_row *sample;
    /* 0 or 1: as want_logits says. m > 1 (speculative verification, core/spec): logits for each of the
     * last m new tokens, in position order, want_logits or not: m rows, or with greedy_id the m picks
     * greedy_id[0..m). Not with sample. At most sy_engine_max_logit_rows over the step. */
    int32_t n_logits;
} sy_step_seq;

/*
 * Runs the model over the batch: writes K/V of the new tokens into each
 * sequence's blocks and, for each sequence with want_logits and no
 * greedy_id, one row of vocab logits into logits (rows in sequence order,
 * greedy_id sequences taking no row; n_logits > 1: that many rows). logits has room for a row per
 * want_logits sequence all the same: past the rows it is scratch (the
 * host picks when the device does not).
 */
int sy_engine_step(sy_engine *e, const sy_step_seq *seqs, int32_t n_seqs, float *logits, sy_err *err);

/*
 * Greedy picks made by the device's argmax op so far (logits rows that were
 * never copied to the host); 0 when the device has no such op or
 * [scheduler] device_sampling = off, where the engine picks on the host.
 */
uint64_t sy_engine_device_picks(const sy_engine *e);
/* Sampled picks (sy_step_seq.sample) the device's sample op made so far; 0 without it or with device_sampling = off. */
uint64_t sy_engine_device_samples(const sy_engine *e);

/* [device] graphs: decode steps replayed from a recording, recordings made, steps run op by op. */
typedef struct sy_engine_graph_counts {
    bool on; /* graphs are in use (configured, allowed, and nothing failed yet) */
    uint64_t replays, recorded, eager;
} sy_engine_graph_counts;
void sy_engine_graph_stats(const sy_engine *e, sy_engine_graph_counts *out);

/* Copies KV blocks src[i] -> dst[i] (prefix-cache copy-on-write), on every rank. */
int sy_engine_copy_blocks(sy_engine *e, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err);

/* ---- multi-token prediction ([speculative] method = mtp; forward_mtp.c, core/spec/spec_mtp.c)
 *
 * The checkpoint's first MTP layer (DeepSeek-V3, GLM-4.5, GLM-5) at position p: x = eh_proj([enorm(embed(t));
 * hnorm(h_p)]) with t the token at p + 1 and h_p the target's final-normed hidden state at p (the row its
 * lm_head reads), one decoder block over x (its K/V, or MLA latents, written into the sequence's own blocks
 * at p as layer n_layers: rolling the target back rolls it back too), g_p = the block's output (the
 * residual stream, before shared_head.norm), logits = shared_head.head(shared_head.norm(g_p)), which
 * predict the token at p + 2. A chained draft feeds g_p back as the hidden state of position p + 1.
 */

/* One sequence's rows of an MTP step: positions pos0 .. pos0 + n - 1. */
typedef struct sy_mtp_seq {
    const int32_t *tokens; /* [n]: for each position p, the token at p + 1 (the one the MTP layer embeds) */
    int32_t n;
    int32_t pos0;          /* the MTP layer's KV holds this sequence's positions [0, pos0) */
    const int32_t *blocks; /* the sequence's block table (the target's), covering pos0 + n positions */
    int32_t n_blocks;
    /* Each row's hidden state h_p: target_row >= 0: rows target_row .. target_row + n - 1 of the last
     * sy_engine_step (its token rows, in step order); target_row < 0: hidden [n, H] on the host (an
     * earlier MTP step's hidden_out, for chaining). */
    int32_t target_row;
    const float *hidden;
    /* Outputs of the last n_out rows (0: the last row only), each NULL when not wanted: their MTP hidden
     * states g [n_out, H], greedy picks [n_out] (sy_greedy_pick's rule, on the device when it can) and
     * logits [n_out, vocab]. */
    int32_t n_out;
    float *hidden_out;
    int32_t *greedy_id;
    float *logits;
} sy_mtp_seq;

/* The engine was opened with [speculative] method = mtp and prepared the MTP layer. */
bool sy_engine_has_mtp(const sy_engine *e);
/* One MTP forward over the batch; with tensor parallelism rank 0 calls it and the followers run it from its
 * plan (sy_engine_follow). The target rows stay valid until the next sy_engine_step; MTP steps do not touch
 * them. */
int sy_engine_mtp_step(sy_engine *e, const sy_mtp_seq *seqs, int32_t n_seqs, sy_err *err);

/* ---- tensor parallelism (a group of one: these do nothing) */

/* Refuses a tensor-parallel size that does not divide the model's heads, KV heads, widths or vocabulary. */
int sy_engine_tp_check(const sy_model_config *c, int tp, sy_err *err);
/* The same for the split [model] moe_parallel selects: expert_parallel also refuses a dense model and an
 * expert count that tp does not divide (and needs no divisible moe_intermediate_size). */
int sy_engine_parallel_check(const sy_model_config *c, int tp, bool expert_parallel, sy_err *err);
int sy_engine_tp_rank(const sy_engine *e);
int sy_engine_tp_size(const sy_engine *e);
/* Seconds rank 0 may stay idle before it must send a heartbeat; 0: none needed. */
double sy_engine_heartbeat_interval(const sy_engine *e);
/* Rank 0: tells the followers it is alive when no plan went out for a heartbeat interval. */
int sy_engine_heartbeat(sy_engine *e, sy_err *err);
/* true once a collective or the plan channel failed: the group is gone, why says why. */
bool sy_engine_broken(const sy_engine *e, const char **why);
/*
 * A follower rank's life: runs every plan rank 0 sends (steps, block
 * copies) until the shutdown plan (SY_OK) or until the group breaks (rank 0
 * died, a peer died, a timeout: an error naming the rank).
 */
int sy_engine_follow(sy_engine *e, sy_err *err);

#endif
