/*
 * plugin-check for comm plugins (single-rank semantics: a group of one,
 * where every collective leaves its data as it was) and frontend plugins
 * (start and stop against a serving table that serves nothing).
 */
#include "config.h"

#include "plugincheck/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void failed(sy_pc *pc, const char *op, const char *cas, const char *step, int rc, sy_err *err)
{
    char note[700];
    err->msg[sizeof err->msg - 1] = '\0';
    snprintf(note, sizeof note, "%s returned %d (%s): %s", step, rc, sy_status_str(rc),
             err->msg[0] ? err->msg : "(no message)");
    sy_pc_row(pc, op, cas, SY_PC_FAIL, -1, -1, note);
}

int sy_pc_check_comm(sy_pc *pc)
{
    const sy_comm_ops *ops = pc->desc->ops;
    const char *cas = "world of 1";
    void *inst = sy_pc_create(pc, "create", cas);
    if (!inst)
        return 0;
    sy_err err;
    memset(&err, 0, sizeof err);
    int rc;
    if (ops->struct_size >= offsetof(sy_comm_ops, setup) + sizeof ops->setup && ops->setup) {
        char rdv[64];
        snprintf(rdv, sizeof rdv, "plugin-check-%ld", (long)getpid());
        if ((rc = ops->setup(inst, 0, 1, rdv, 10.0, &err))) {
            failed(pc, "setup", cas, "setup(0, 1)", rc, &err);
            sy_pc_destroy(pc, inst);
            return 0;
        }
        sy_pc_row(pc, "setup", cas, SY_PC_OK, -1, -1, "rank 0 of 1");
    } else {
        sy_pc_row(pc, "setup", cas, SY_PC_SKIP, -1, -1, "optional op not provided (or an ABI 1.0 table without it)");
    }
    int r = ops->rank(inst), s = ops->size(inst);
    char note[96];
    snprintf(note, sizeof note, "rank() %d, size() %d; expected 0 and 1", r, s);
    sy_pc_row(pc, "rank/size", cas, r == 0 && s == 1 ? SY_PC_OK : SY_PC_FAIL, -1, -1, note);

    enum { N = 3 * 257 };
    float x[N], before[N];
    double ref[N];
    sy_pc_fill(pc, x, N, 100);
    memcpy(before, x, sizeof x);
    for (int i = 0; i < N; i++)
        ref[i] = before[i];
    sy_tensor t = sy_tensor_2d(x, SY_DTYPE_F32, 3, 257);
    if ((rc = ops->allreduce_sum(inst, &t, &err)))
        failed(pc, "allreduce_sum", "[3, 257] f32", "allreduce_sum", rc, &err);
    else {
        double e = sy_pc_err(x, ref, N);
        sy_pc_row(pc, "allreduce_sum", "[3, 257] f32", e == 0 ? SY_PC_OK : SY_PC_FAIL, e, 0,
                  e == 0 ? "a sum over one rank is the input" : "changed the data");
    }
    if (ops->allgather) {
        float out[N];
        memset(out, 0, sizeof out);
        sy_tensor to = sy_tensor_2d(out, SY_DTYPE_F32, 3, 257);
        if ((rc = ops->allgather(inst, &t, &to, &err)))
            failed(pc, "allgather", "[3, 257] f32", "allgather", rc, &err);
        else {
            double e = sy_pc_err(out, ref, N);
            sy_pc_row(pc, "allgather", "[3, 257] f32", e == 0 ? SY_PC_OK : SY_PC_FAIL, e, 0, "");
        }
    }
    if (ops->broadcast) {
        if ((rc = ops->broadcast(inst, x, sizeof x, 0, &err)))
            failed(pc, "broadcast", "root 0, 3084 bytes", "broadcast", rc, &err);
        else {
            double e = sy_pc_err(x, ref, N);
            sy_pc_row(pc, "broadcast", "root 0, 3084 bytes", e == 0 ? SY_PC_OK : SY_PC_FAIL, e, 0, "");
        }
    }
    if (ops->barrier) {
        if ((rc = ops->barrier(inst, &err)))
            failed(pc, "barrier", cas, "barrier", rc, &err);
        else
            sy_pc_row(pc, "barrier", cas, SY_PC_OK, -1, -1, "");
    }
    float *big = pc->speed ? calloc(1 << 20, sizeof(float)) : NULL;
    if (big) {
        for (size_t bytes = 1024; bytes <= sizeof(float) << 20; bytes *= 32) {
            char c2[64];
            snprintf(c2, sizeof c2, "allreduce_sum %zu bytes", bytes);
            sy_tensor tb = sy_tensor_2d(big, SY_DTYPE_F32, 1, (int64_t)(bytes / 4));
            long runs = 0;
            double t0 = sy_pc_now(), el = 0;
            rc = SY_OK;
            while (!rc && (runs < 3 || el < pc->min_time)) {
                rc = ops->allreduce_sum(inst, &tb, &err);
                runs++;
                el = sy_pc_now() - t0;
            }
            if (rc)
                failed(pc, "allreduce_sum", c2, "allreduce_sum", rc, &err);
            else
                sy_pc_time_row(pc, "allreduce_sum", c2, el / (double)runs * 1e6, runs, (double)bytes, "GB/s");
        }
        free(big);
    }
    sy_pc_destroy(pc, inst);
    return 0;
}

/* ------------------------------------------------------------- frontend */

static int fake_submit(void *ctx, const sy_request *req, uint64_t *id, sy_err *err)
{
    (void)ctx;
    (void)req;
    (void)id;
    return sy_err_set(err, SY_ERR_UNAVAILABLE, "plugin-check serves no model");
}

static void fake_cancel(void *ctx, uint64_t id)
{
    (void)ctx;
    (void)id;
}

static int fake_tokenize(void *ctx, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
                         sy_err *err)
{
    (void)ctx;
    (void)text;
    (void)len;
    (void)add_special;
    *ids = NULL;
    *n = 0;
    return sy_err_set(err, SY_ERR_UNAVAILABLE, "plugin-check serves no model");
}

static int fake_detokenize(void *ctx, const int32_t *ids, size_t n, char **text, size_t *len, sy_err *err)
{
    (void)ctx;
    (void)ids;
    (void)n;
    *text = NULL;
    *len = 0;
    return sy_err_set(err, SY_ERR_UNAVAILABLE, "plugin-check serves no model");
}

static int fake_template(void *ctx, const char *messages, const char *tools, int add_gen, const char *kwargs,
                         char **out, size_t *len, sy_err *err)
{
    (void)ctx;
    (void)messages;
    (void)tools;
    (void)add_gen;
    (void)kwargs;
    *out = NULL;
    *len = 0;
    return sy_err_set(err, SY_ERR_UNAVAILABLE, "plugin-check serves no model");
}

static int fake_model_info(void *ctx, sy_model_info *out)
{
    (void)ctx;
    if (!out || out->struct_size < sizeof *out)
        return SY_ERR_INVALID;
    out->id = "plugin-check";
    out->max_seq_len = 16;
    out->vocab = 16;
    out->created = 0;
    return SY_OK;
}

static int fake_ready(void *ctx)
{
    (void)ctx;
    return 0;
}

static int fake_metrics(void *ctx, char **out, size_t *len, sy_err *err)
{
    (void)ctx;
    *out = NULL;
    *len = 0;
    return sy_err_set(err, SY_ERR_UNAVAILABLE, "plugin-check keeps no metrics");
}

const sy_serving_api *sy_pc_fake_serving(void)
{
    static const sy_serving_api fake = {sizeof(sy_serving_api), fake_submit,     fake_cancel,
                                        fake_tokenize,          fake_detokenize, fake_template,
                                        fake_model_info,        fake_ready,      fake_metrics};
    return &fake;
}

int sy_pc_check_frontend(sy_pc *pc)
{
    const sy_frontend_ops *ops = pc->desc->ops;
    const char *cas = "fake serving table, never ready";
    void *inst = sy_pc_create(pc, "start/stop", cas);
    if (inst) {
        sy_err err;
        memset(&err, 0, sizeof err);
        int rc = ops->start(inst, &err);
        if (rc)
            failed(pc, "start/stop", cas, "start", rc, &err);
        else {
            ops->stop(inst);
            sy_pc_row(pc, "start/stop", cas, SY_PC_OK, -1, -1, "started, stopped, destroyed");
        }
        sy_pc_destroy(pc, inst);
    }
    return 0;
}
