/*
 * sy-bench-cpu: prefill and batch-1 decode speed of the engine on one model,
 * next to the decode bound this machine's memory bandwidth allows (bytes of
 * weights read per token / measured read bandwidth). Prints a table; never
 * asserts anything, since timings on shared machines are noisy.
 */
#include "config.h"

#include "engine/generate.h"
#include "engine/engine_internal.h"
#include "util/log.h"
#include "util/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct bw_slice {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_slice;

static void *bw_read(void *arg)
{
    bw_slice *s = arg;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = 0; i + 8 <= s->n; i += 8) {
        a0 += s->p[i];
        a1 += s->p[i + 1];
        a2 += s->p[i + 2];
        a3 += s->p[i + 3];
        a4 += s->p[i + 4];
        a5 += s->p[i + 5];
        a6 += s->p[i + 6];
        a7 += s->p[i + 7];
    }
    s->sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    return NULL;
}

/* Best of several full passes over a buffer much larger than the caches. */
static double read_bandwidth(int threads, size_t bytes)
{
    uint64_t *buf = aligned_alloc(64, bytes);
    if (!buf)
        return 0;
    size_t n = bytes / 8;
    for (size_t i = 0; i < n; i++)
        buf[i] = i;
    double best = 0;
    pthread_t th[256];
    bw_slice sl[256];
    if (threads > 256)
        threads = 256;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = sy_now();
        for (int t = 0; t < threads; t++) {
            sl[t].p = buf + n / threads * t;
            sl[t].n = n / threads;
            pthread_create(&th[t], NULL, bw_read, &sl[t]);
        }
        uint64_t sink = 0;
        for (int t = 0; t < threads; t++) {
            pthread_join(th[t], NULL);
            sink += sl[t].sum;
        }
        double dt = sy_now() - t0;
        if (sink == 42) /* keeps the reads alive */
            fprintf(stderr, " ");
        double gbs = (double)(n / threads * threads * 8) / dt / 1e9;
        if (gbs > best)
            best = gbs;
    }
    free(buf);
    return best;
}


/* ---------------------------------------------------------------- --profile
 * Wraps the engine's device and attention op tables with timers: time per
 * op (linears by weight shape) over one run, so a decode's time splits
 * into weight streaming, attention and glue. Timing each op adds a clock
 * read per op; the figures are for finding the gap, not for the table. */

#define PROF_MAX 64
typedef struct prof_slot {
    char name[48];
    double s, flop; /* flop: the linears' 2 x rows x m x k */
    int own_peak;   /* its FLOPs are held against peak (0: none), not the device's: another plugin ran them */
    double peak;
    uint64_t calls, bytes;
} prof_slot;
static prof_slot prof[PROF_MAX];
static int prof_n;
static const sy_device_ops *prof_dev;
static const sy_attn_ops *prof_att;
static const sy_moe_ops *prof_mo;
static sy_device_ops prof_dev_ops;
static sy_attn_ops prof_att_ops;
static sy_moe_ops prof_mo_ops;
static double prof_moe_flop_per_row; /* the routed experts' 2 x top_k x 3 x hidden x moe_inter */
static double prof_moe_peak;         /* the moe plugin's own matmul_peak for the experts' dtype: its matmul may differ */

static prof_slot *prof_get(const char *name)
{
    for (int i = 0; i < prof_n; i++)
        if (strcmp(prof[i].name, name) == 0)
            return &prof[i];
    if (prof_n == PROF_MAX)
        return &prof[PROF_MAX - 1];
    snprintf(prof[prof_n].name, sizeof prof[prof_n].name, "%s", name);
    return &prof[prof_n++];
}

static prof_slot *prof_add(const char *name, double t0, uint64_t bytes, double flop)
{
    prof_slot *p = prof_get(name);
    p->s += sy_now() - t0;
    p->calls++;
    p->bytes += bytes;
    p->flop += flop;
    return p;
}

static int prof_linear(void *inst, const sy_tensor *x, const sy_tensor *w, const sy_tensor *bias, sy_tensor *out,
                       sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_dev->linear(inst, x, w, bias, out, err);
    char nm[48];
    snprintf(nm, sizeof nm, "linear %lldx%lld n=%s", (long long)w->shape[0], (long long)w->shape[1],
             x->shape[0] == 1 ? "1" : ">1");
    prof_add(nm, t0, sy_tensor_nbytes(w), 2.0 * (double)x->shape[0] * (double)w->shape[0] * (double)w->shape[1]);
    return rc;
}

static int prof_linear_multi(void *inst, const sy_tensor *x, int32_t n, const sy_tensor *const *w,
                             const sy_tensor *const *bias, sy_tensor *const *out, sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_dev->linear_multi(inst, x, n, w, bias, out, err);
    char nm[48];
    int64_t m = 0;
    uint64_t bytes = 0;
    for (int32_t i = 0; i < n; i++) {
        m += w[i]->shape[0];
        bytes += sy_tensor_nbytes(w[i]);
    }
    snprintf(nm, sizeof nm, "linear_multi %dx %lldx%lld n=%s", n, (long long)m, (long long)w[0]->shape[1],
             x->shape[0] == 1 ? "1" : ">1");
    prof_add(nm, t0, bytes, 2.0 * (double)x->shape[0] * (double)m * (double)w[0]->shape[1]);
    return rc;
}

static int prof_embed(void *inst, const sy_tensor *table, const int32_t *ids, int64_t n, sy_tensor *out, sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_dev->embed(inst, table, ids, n, out, err);
    prof_add("embed", t0, 0, 0);
    return rc;
}

static int prof_rmsnorm(void *inst, const sy_tensor *x, const sy_tensor *w, float eps, sy_tensor *out, sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_dev->rmsnorm(inst, x, w, eps, out, err);
    prof_add("rmsnorm", t0, 0, 0);
    return rc;
}

static int prof_add_rmsnorm(void *inst, sy_tensor *residual, const sy_tensor *x, const sy_tensor *w, float eps,
                            sy_tensor *out, sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_dev->add_rmsnorm(inst, residual, x, w, eps, out, err);
    prof_add("add_rmsnorm", t0, 0, 0);
    return rc;
}

static int prof_rope(void *inst, sy_tensor *x, const int32_t *pos, const sy_rope_params *p, sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_dev->rope(inst, x, pos, p, err);
    prof_add("rope", t0, 0, 0);
    return rc;
}

static int prof_silu_mul(void *inst, const sy_tensor *gate, const sy_tensor *up, sy_tensor *out, sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_dev->silu_mul(inst, gate, up, out, err);
    prof_add("silu_mul", t0, 0, 0);
    return rc;
}

static int prof_download(void *inst, void *dst, const sy_tensor *src, size_t bytes, sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_dev->download(inst, dst, src, bytes, err);
    prof_add("download", t0, 0, 0);
    return rc;
}

static int prof_attn(void *inst, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                     const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_att->forward(inst, layer, b, q, k, v, out, err);
    prof_add("attention", t0, 0, 0);
    return rc;
}

static int prof_moe(void *inst, int32_t layer, const sy_tensor *x, const sy_tensor *router_logits, sy_tensor *out,
                    sy_err *err)
{
    const double t0 = sy_now();
    int rc = prof_mo->forward(inst, layer, x, router_logits, out, err);
    prof_slot *p = prof_add("moe forward (routed experts)", t0, 0, prof_moe_flop_per_row * (double)x->shape[0]);
    p->own_peak = 1;
    p->peak = prof_moe_peak;
    return rc;
}

static void prof_install(sy_engine *e)
{
    prof_dev = e->dev;
    prof_att = e->att;
    prof_dev_ops = *e->dev;
    prof_att_ops = *e->att;
    prof_dev_ops.linear = prof_linear;
    if (prof_dev_ops.linear_multi)
        prof_dev_ops.linear_multi = prof_linear_multi;
    prof_dev_ops.embed = prof_embed;
    prof_dev_ops.rmsnorm = prof_rmsnorm;
    prof_dev_ops.add_rmsnorm = prof_add_rmsnorm;
    prof_dev_ops.rope = prof_rope;
    prof_dev_ops.silu_mul = prof_silu_mul;
    prof_dev_ops.download = prof_download;
    prof_att_ops.forward = prof_attn;
    e->dev = &prof_dev_ops;
    e->att = &prof_att_ops;
    if (e->mo) { /* else a mixture-of-experts model's experts would count as "outside the ops" */
        prof_mo = e->mo;
        prof_mo_ops = *e->mo;
        prof_mo_ops.forward = prof_moe;
        prof_moe_flop_per_row = 2.0 * e->mc->top_k * 3.0 * e->mc->hidden * e->mc->moe_inter;
        void *peak_f = e->moe->plugin->desc->get_proc ? e->moe->plugin->desc->get_proc("matmul_peak") : NULL;
        sy_dtype wdt = SY_DTYPE_F32;
        for (int32_t l = 0; l < e->mc->n_layers; l++)
            if (e->model->layers[l].is_moe && e->model->layers[l].exp_gate) {
                wdt = e->model->layers[l].exp_gate[0].dtype;
                break;
            }
        prof_moe_peak = peak_f ? ((sy_device_matmul_peak_fn)peak_f)(e->moe->inst, wdt, NULL, 0) : 0;
        e->mo = &prof_mo_ops;
    }
}

static void prof_reset(void)
{
    prof_n = 0;
    memset(prof, 0, sizeof prof);
}

/* Per token: time in each op; for the linears the weight bytes read per second (decode's bound) and
 * GFLOP/s (prefill's), the latter against the peak of the plugin that ran them where it has one. */
static void prof_print(const char *what, double total_s, double per, double peak)
{
    double ops = 0;
    for (int i = 0; i < prof_n; i++)
        ops += prof[i].s;
    printf("\nprofile of %s: %.1f us per token, %.1f us of it in ops\n", what, 1e6 * total_s / per, 1e6 * ops / per);
    printf("| op | calls/token | us/token | share | GB/s | GFLOP/s |\n|---|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < prof_n; i++) {
        const prof_slot *p = &prof[i];
        char gbs[32] = "", gfl[48] = "";
        if (p->bytes && p->s > 0)
            snprintf(gbs, sizeof gbs, "%.1f", (double)p->bytes / p->s / 1e9);
        if (p->flop > 0 && p->s > 0) {
            const double g = p->flop / p->s / 1e9, pk = p->own_peak ? p->peak : peak;
            if (pk > 0)
                snprintf(gfl, sizeof gfl, "%.1f (%.0f%% of peak)", g, 100.0 * g / pk);
            else
                snprintf(gfl, sizeof gfl, "%.1f", g);
        }
        printf("| %s | %.1f | %.1f | %.1f%% | %s | %s |\n", p->name, (double)p->calls / per, 1e6 * p->s / per,
               100.0 * p->s / total_s, gbs, gfl);
    }
    printf("| (outside the ops: sampling, scheduling) | | %.1f | %.1f%% | | |\n", 1e6 * (total_s - ops) / per,
           100.0 * (total_s - ops) / total_s);
}

static void usage(void)
{
    fprintf(stderr, "usage: sy-bench-cpu --model DIR [--plugin-dir DIR] [--threads N] [--prompts 128,512] [--decode N]\n"
                    "                    [--attention cpu] [--repeat R] [--profile] [--set section.key=value]...\n"
                    "  --set   any config key, e.g. --set device.matmul=bf16 --set moe.matmul=bf16\n"
                    "Make the ~110M bf16 llama first with: sy-mkmodel --preset bench-110m --out DIR\n");
}

int main(int argc, char **argv)
{
    const char *model = NULL, *plugin_dir = NULL, *attn = "cpu", *prompts = "128,512";
    int threads = 0, decode = 128, repeat = 3, profile = 0;
    long long num;
    const char *sets[32];
    int n_sets = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--profile") == 0) {
            profile = 1;
            continue;
        }
        if (!v && strcmp(a, "-h") && strcmp(a, "--help")) {
            fprintf(stderr, "sy-bench-cpu: %s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--model") == 0)
            model = v;
        else if (strcmp(a, "--plugin-dir") == 0)
            plugin_dir = v;
        else if (strcmp(a, "--threads") == 0) {
            if (sy_opt_int("sy-bench-cpu", a, v, 1, 1024, &num))
                return 2;
            threads = (int)num;
        }
        else if (strcmp(a, "--prompts") == 0)
            prompts = v;
        else if (strcmp(a, "--decode") == 0) {
            /* at least 2: the first token comes with the prefill, so a rate needs a second */
            if (sy_opt_int("sy-bench-cpu", a, v, 2, 1 << 20, &num))
                return 2;
            decode = (int)num;
        }
        else if (strcmp(a, "--attention") == 0)
            attn = v;
        else if (strcmp(a, "--repeat") == 0) {
            if (sy_opt_int("sy-bench-cpu", a, v, 1, 1000, &num))
                return 2;
            repeat = (int)num;
        }
        else if (strcmp(a, "--set") == 0) {
            if (n_sets == (int)(sizeof sets / sizeof sets[0])) {
                fprintf(stderr, "sy-bench-cpu: at most %d --set options, found another: --set %s\n", n_sets, v);
                return 2;
            }
            sets[n_sets++] = v;
        }
        else {
            if (strcmp(a, "-h") && strcmp(a, "--help"))
                fprintf(stderr, "sy-bench-cpu: unknown option %s\n", a);
            usage();
            return strcmp(a, "-h") && strcmp(a, "--help") ? 2 : 0;
        }
        i++;
    }
    if (!model) {
        fprintf(stderr, "sy-bench-cpu: --model DIR is required\n");
        usage();
        return 2;
    }
    if (threads <= 0)
        threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    sy_log_set_level(SY_LOG_WARN);

    sy_err err = {{0}};
    sy_config *cfg = sy_config_new();
    if (!cfg) {
        fprintf(stderr, "sy-bench-cpu: out of memory\n");
        return 1;
    }
    char model_set[4300], attn_set[300], threads_set[64];
    snprintf(model_set, sizeof model_set, "model.path=%s", model);
    snprintf(attn_set, sizeof attn_set, "attention.plugin=%s", attn);
    snprintf(threads_set, sizeof threads_set, "device.threads=%d", threads);
    const char *fixed[] = {"device.plugin=cpu",        "comm.plugin=local",        "moe.plugin=cpu",
                           "scheduler.max_batch_tokens=512", "scheduler.max_running=1", "scheduler.kv_cache_size=1G",
                           model_set,                  attn_set,                   threads_set};
    /* The bench's own settings first, then SWITCHYARD_SET and --set over them. */
    if (sy_config_set_all(cfg, fixed, sizeof fixed / sizeof fixed[0], &err) ||
        sy_config_apply_overrides(cfg, sets, (size_t)n_sets, &err)) {
        fprintf(stderr, "sy-bench-cpu: %s\n", err.msg);
        sy_config_free(cfg);
        return 2;
    }
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = plugin_dir, .progress = true};
    if (sy_engine_open(cfg, &eo, &e, &err)) {
        fprintf(stderr, "sy-bench-cpu: %s\n", err.msg);
        sy_config_free(cfg);
        return 1;
    }
    const sy_model_config *mc = sy_engine_model_config(e);
    if (profile)
        prof_install(e);

    /* Bytes one decode step must stream: every weight except the embedding
     * table, of which a step reads one row (unless tied to the LM head). */
    const sy_model *m = e->model;
    uint64_t step_bytes = m->weight_bytes;
    if (!e->lm_head_is_embed)
        step_bytes -= sy_tensor_nbytes(&m->embed);
    /* MoE: a token reads only its top_k experts of each layer. */
    if (mc->n_experts > 0)
        for (int32_t l = 0; l < mc->n_layers; l++) {
            const sy_layer_weights *L = &m->layers[l];
            if (!L->is_moe || !L->exp_gate)
                continue;
            uint64_t ex = 0;
            for (int32_t x = 0; x < mc->n_experts; x++)
                ex += sy_tensor_nbytes(&L->exp_gate[x]) + sy_tensor_nbytes(&L->exp_up[x]) +
                      sy_tensor_nbytes(&L->exp_down[x]);
            step_bytes -= ex - ex / (uint64_t)mc->n_experts * (uint64_t)mc->top_k;
        }

    double bw = read_bandwidth(threads, (size_t)1 << 30);
    double bound = bw * 1e9 / (double)step_bytes;

    printf("model: %s, %.1fM parameters, %s weights, %.1f MB read per decode token\n", mc->arch_name,
           (double)m->n_params / 1e6, sy_dtype_name(m->embed.dtype), (double)step_bytes / 1e6);
    printf("plugins: %s; threads: %d\n", sy_engine_describe(e), threads);
    printf("measured read bandwidth: %.1f GB/s -> batch-1 decode bound %.1f tok/s\n", bw, bound);
    /* Prefill's matmul work: 2 FLOP per weight a token reads, less the LM head, which only the last
     * position runs (attention's own products left out), against the device's peak for the path (measured FMA rate, peak.c). */
    const uint64_t head_elems = (uint64_t)m->lm_head.shape[0] * (uint64_t)m->lm_head.shape[1];
    const double elem_bytes = sy_dtype_bits(m->embed.dtype) / 8.0;
    const double tok_flop = 2.0 * ((double)step_bytes / elem_bytes - (double)head_elems), head_flop = 2.0 * head_elems;
    void *peak_f = e->device->plugin->desc->get_proc ? e->device->plugin->desc->get_proc("matmul_peak") : NULL;
    char path[32] = "";
    const double peak =
        peak_f ? ((sy_device_matmul_peak_fn)peak_f)(e->device->inst, m->embed.dtype, path, sizeof path) : 0;
    if (peak > 0)
        printf("matmul peak: %.0f GFLOP/s (%s); prefill GFLOP/s counts the linear layers' weights only\n",
               peak, path);
    printf("\n| test | tokens | best tok/s | mean tok/s | vs bound |\n|---|---:|---:|---:|---:|\n");

    const int32_t V = mc->vocab;
    char *list = sy_strdup(prompts);
    int rc = 0;
    for (char *tok = strtok(list, ","); tok && rc == 0; tok = strtok(NULL, ",")) {
        int32_t n = atoi(tok);
        if (n < 1 || n + decode > sy_engine_max_seq_len(e)) {
            fprintf(stderr, "sy-bench-cpu: prompt length %d out of range for context %d\n", n, sy_engine_max_seq_len(e));
            rc = 1;
            break;
        }
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
        for (int32_t i = 0; i < n; i++)
            ids[i] = (int32_t)((i * 7919 + 13) % V);
        double best = 0, sum = 0, prof_s = 0;
        for (int r = 0; r < repeat; r++) {
            prof_reset();
            sy_gen_params gp = {.max_tokens = 1, .sampling = sy_sampling_default(), .ignore_eos = true};
            sy_gen_stats st;
            if ((rc = sy_generate(e, ids, n, &gp, NULL, NULL, &st, &err))) {
                fprintf(stderr, "sy-bench-cpu: %s\n", err.msg);
                break;
            }
            double tps = n / st.prefill_s;
            prof_s = st.prefill_s;
            sum += tps;
            if (tps > best)
                best = tps;
        }
        if (rc == 0) {
            char of_peak[96] = "";
            if (peak > 0)
                snprintf(of_peak, sizeof of_peak, "%.0f GFLOP/s of %.0f peak (%s)",
                         (best * tok_flop + best / n * head_flop) / 1e9, peak, path);
            printf("| prefill pp%d | %d | %.1f | %.1f | %s |\n", n, n, best, sum / repeat, of_peak);
        }
        if (rc == 0 && profile) {
            char what[64];
            snprintf(what, sizeof what, "prefill pp%d (last run)", n);
            prof_print(what, prof_s, n, peak);
        }
        free(ids);
    }
    free(list);
    if (rc == 0) {
        int32_t prompt[4] = {1, 2, 3, 4};
        double best = 0, sum = 0, prof_s = 0;
        for (int r = 0; r < repeat; r++) {
            prof_reset();
            sy_gen_params gp = {.max_tokens = decode, .sampling = sy_sampling_default(), .ignore_eos = true};
            sy_gen_stats st;
            if ((rc = sy_generate(e, prompt, 4, &gp, NULL, NULL, &st, &err))) {
                fprintf(stderr, "sy-bench-cpu: %s\n", err.msg);
                break;
            }
            double tps = (st.generated - 1) / st.decode_s;
            prof_s = st.prefill_s + st.decode_s;
            sum += tps;
            if (tps > best)
                best = tps;
        }
        if (rc == 0)
            printf("| decode tg%d (batch 1) | %d | %.1f | %.1f | %.0f%% |\n", decode, decode, best, sum / repeat,
                   100.0 * best / bound);
        if (rc == 0 && profile)
            prof_print("decode (last run, prompt of 4 included)", prof_s, decode, peak);
    }
    sy_engine_close(e);
    sy_config_free(cfg);
    return rc;
}
