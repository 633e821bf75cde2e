/*
 * The engine calls that a tensor-parallel group runs together. Rank 0 sends
 * each one as a step plan (core/dist/plan.h) before running it itself; the
 * followers receive plans in sy_engine_follow and run the same calls, so
 * every rank makes the same collectives in the same order. With a group of
 * one these are the plain local calls.
 */
#include "config.h"

#include "engine/engine_internal.h"
#include "util/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool leader(const sy_engine *e) { return e->tp_size > 1 && e->tp_rank == 0; }

/* Every failure of a collective or of the plan channel ends the group (the comm ABI: destroy after one). */
static int broke(sy_engine *e, int rc, sy_err *err)
{
    if (rc == SY_ERR_UNAVAILABLE && e->tp_size > 1 && !e->tp_broken) {
        e->tp_broken = true;
        snprintf(e->tp_broken_msg, sizeof e->tp_broken_msg, "%s", err ? err->msg : "a collective failed");
    }
    return rc;
}

static int send_plan(sy_engine *e, sy_err *err)
{
    if (e->tp_broken)
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "the tensor-parallel group is broken: %s", e->tp_broken_msg);
    int rc = sy_plan_send(&e->chan, &e->plan, err);
    e->last_plan_s = now_s();
    return broke(e, rc, err);
}

int sy_engine_step(sy_engine *e, const sy_step_seq *seqs, int32_t n_seqs, float *logits, sy_err *err)
{
    int rc;
    if (leader(e) && ((rc = sy_plan_encode_step(&e->plan, seqs, n_seqs, err)) || (rc = send_plan(e, err))))
        return rc;
    return broke(e, sy__engine_forward(e, seqs, n_seqs, logits, err), err);
}

/* Every rank's own copy (MLA models keep their latent cache in the core, forward_mla.c). */
static int copy_local(sy_engine *e, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    if (e->mla)
        return sy__mla_copy_blocks(e, src, dst, n, err);
    return n > 0 ? e->att->copy_blocks(e->attn->inst, src, dst, n, err) : SY_OK;
}

int sy_engine_copy_blocks(sy_engine *e, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    int rc;
    if (leader(e) && ((rc = sy_plan_encode_copy(&e->plan, src, dst, n, err)) || (rc = send_plan(e, err))))
        return rc;
    return copy_local(e, src, dst, n, err);
}

int sy_engine_mtp_step(sy_engine *e, const sy_mtp_seq *seqs, int32_t n_seqs, sy_err *err)
{
    int rc;
    if (leader(e) && ((rc = sy_plan_encode_mtp(&e->plan, seqs, n_seqs, e->mc->hidden, err)) ||
                      (rc = send_plan(e, err))))
        return rc;
    return broke(e, sy__engine_mtp_forward(e, seqs, n_seqs, err), err);
}

int sy_engine_tp_rank(const sy_engine *e) { return e->tp_rank; }
int sy_engine_tp_size(const sy_engine *e) { return e->tp_size; }
double sy_engine_heartbeat_interval(const sy_engine *e) { return leader(e) ? e->heartbeat_s : 0; }

bool sy_engine_broken(const sy_engine *e, const char **why)
{
    if (why)
        *why = e->tp_broken ? e->tp_broken_msg : NULL;
    return e->tp_broken;
}

int sy_engine_heartbeat(sy_engine *e, sy_err *err)
{
    if (!leader(e) || now_s() - e->last_plan_s < e->heartbeat_s)
        return SY_OK;
    sy_plan_encode_empty(&e->plan, SY_PLAN_HEARTBEAT);
    return send_plan(e, err);
}

void sy__tp_shutdown(sy_engine *e)
{
    if (!leader(e) || e->tp_broken || !e->layers)
        return;
    sy_err err = {{0}};
    sy_plan_encode_empty(&e->plan, SY_PLAN_SHUTDOWN);
    if (send_plan(e, &err))
        sy_warn("tensor parallel: telling the followers to stop: %s", err.msg);
}

int sy_engine_follow(sy_engine *e, sy_err *err)
{
    if (e->tp_size <= 1 || e->tp_rank == 0)
        return sy_err_set(err, SY_ERR_INVALID, "sy_engine_follow: rank %d of %d is not a follower", e->tp_rank,
                          e->tp_size);
    e->plan.hidden_width = (int32_t)e->mc->hidden;
    for (;;) {
        int rc = sy_plan_recv(&e->chan, &e->plan, err);
        if (rc)
            return broke(e, rc == SY_ERR_UNAVAILABLE ? rc : SY_ERR_UNAVAILABLE, err);
        switch (e->plan.hdr.kind) {
        case SY_PLAN_SHUTDOWN:
            return SY_OK;
        case SY_PLAN_HEARTBEAT:
            continue;
        case SY_PLAN_COPY:
            rc = copy_local(e, e->plan.src, e->plan.dst, e->plan.hdr.n_pairs, err);
            break;
        case SY_PLAN_MTP:
            rc = sy__engine_mtp_forward(e, e->plan.mseqs, e->plan.hdr.n_seqs, err);
            break;
        default:
            rc = sy__engine_forward(e, e->plan.seqs, e->plan.hdr.n_seqs, NULL, err);
            break;
        }
        if (rc == SY_ERR_UNAVAILABLE)
            return broke(e, rc, err);
        /* Rank 0 ran the same plan and failed the same way (its caller reports it): carry on. */
        if (rc)
            sy_debug("tensor parallel rank %d: plan %llu failed as on rank 0: %s", e->tp_rank,
                     (unsigned long long)e->plan.hdr.seq, err->msg);
    }
}
