/*
 * `switchyard tune-moe`: sweeps candidate tiles of the moe plugin's expert
 * GEMMs (the plugin's `tile` key) for a model's MoE shape on this machine,
 * times one MoE layer forward per token-count bucket, prints built-in vs
 * best per bucket, and writes the winners as the tuning table the plugin
 * reads (plugins/common/moe/sytune.h). The candidates are the plugin's own
 * list where it has one (get_proc("tile_candidates"): moe cuda's compiled
 * variants, written as `tile = NAME`); otherwise moe cpu's sweep of
 * token_block,n_block,threads, written as those three keys. Inputs live in
 * the device plugin's memory (a GPU's for moe cuda), and every timed
 * forward ends with the device's synchronize.
 *
 * The experts timed are the model's own (its first MoE layer, in its
 * dtype); inputs and router logits are seeded random. Every candidate is
 * timed in alternation with the built-in tiles (--reps rounds, best of each
 * side) and ranked by the ratio, so that load from elsewhere on the machine
 * hits both alike; the best SHORTLIST per bucket are then timed the same
 * way with 2 x --reps rounds, and the best of those is recorded only when
 * its median ratio puts it 3% ahead and it won clearly more than half the
 * rounds; otherwise the bucket keeps the built-in tiles (token_block 0).
 */
#include "config.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "model/model.h"
#include "plugin/config.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "plugin/loader_config.h"
#include "util/log.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_BUCKETS 16
#define MAX_CANDIDATES 256
#define SHORTLIST 3 /* candidates per bucket the sweep passes to the confirmation */

typedef int (*tuning_table_fn)(void *inst, char *path, size_t cap, const char **source);
/* get_proc("tile_candidates"): up to cap `tile` values to time, the default first; returns how many. */
typedef int (*tile_candidates_fn)(void *inst, const char **names, int cap);

typedef struct tune_opts {
    sy_cli_common common;
    int64_t tokens[MAX_BUCKETS];
    int n_tokens;
    int reps;
    const char *out;  /* file to write; NULL: the plugin's path for this CPU */
    int dry_run;      /* print, write nothing */
    const char *tiles; /* --tiles: the candidates instead of the sweep; NULL: the sweep */
} tune_opts;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard tune-moe [--model DIR] [-c CONFIG] [--set moe.KEY=VALUE]... [--tokens 1,4,16,64,256]\n"
            "                           [--reps N] [--out FILE] [--dry-run] [--plugin-dir DIR]...\n"
            "Times the moe plugin's expert GEMM tiles (moe cpu: token_block, n_block, threads; moe cuda: its\n"
            "compiled variants) on the model's first MoE layer for each token-count bucket, prints built-in vs\n"
            "tuned, and writes the tuning table.\n"
            "  --tokens L   buckets: tokens per forward pass (default 1,4,16,64,256; each <= [moe] max_tokens)\n"
            "  --reps N     timed runs per candidate and bucket, best kept (default 5)\n"
            "  --out FILE   where to write the table (default: <[moe] tuning_dir>/<arch>/<device model>/\n"
            "               E=..,N=..,K=..,dtype=...ini, the file the plugin looks for first; <arch> is\n"
            "               cpu-<isa> or cuda-sm<cc>)\n"
            "  --dry-run    print the results, write nothing\n"
            "  --tiles L    time only these candidates (space-separated: tb,nb,thr for moe cpu, variant\n"
            "               names such as 64x8x32 for moe cuda) instead of the sweep;\n"
            "               with -v every candidate's time per bucket is printed\n"
            "Exit status: 0; 1 when the model or a plugin fails; 2 on bad usage.\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_args(int argc, char **argv, tune_opts *o)
{
    static const int64_t dflt[] = {1, 4, 16, 64, 256};
    o->n_tokens = 5;
    memcpy(o->tokens, dflt, sizeof dflt);
    o->reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        long long n;
        int rc = sy_cli_common_arg(&o->common, argc, argv, &i);
        if (rc < 0)
            return -1;
        if (rc > 0)
            continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--dry-run")) {
            o->dry_run = 1;
        } else if (!strcmp(a, "--tiles")) {
            if (!(o->tiles = sy_cli_value(argc, argv, &i)))
                return -1;
        } else if (!strcmp(a, "--out")) {
            if (!(o->out = sy_cli_value(argc, argv, &i)))
                return -1;
        } else if (!strcmp(a, "--reps")) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_int(a, v, 1, 1000, &n))
                return -1;
            o->reps = (int)n;
        } else if (!strcmp(a, "--tokens")) {
            if (!(v = sy_cli_value(argc, argv, &i)))
                return -1;
            o->n_tokens = 0;
            const char *p = v;
            while (*p) {
                char *end;
                errno = 0;
                long long t = strtoll(p, &end, 10);
                if (errno || end == p || t < 1 || t > 1048576 || (*end && *end != ',') || o->n_tokens == MAX_BUCKETS) {
                    fprintf(stderr, "switchyard tune-moe: --tokens expects up to %d comma-separated counts 1..1048576, "
                            "found \"%s\"\n", MAX_BUCKETS, v);
                    return -1;
                }
                o->tokens[o->n_tokens++] = t;
                p = *end ? end + 1 : end;
            }
        } else {
            fprintf(stderr, "switchyard tune-moe: unknown option \"%s\"\n", a);
            usage(stderr);
            return -1;
        }
    }
    return 0;
}

typedef struct tune_ctx {
    tune_opts *o;
    sy_config *cfg;
    sy_loader *ld;
    sy_host_ctx host;
    sy_plugin_inst *dev;
    sy_model *model;
    const sy_layer_weights *layer;
    sy_moe_problem prob;
    const sy_device_ops *dops;
    sy_tensor x, logits, out; /* [nmax, ...] in the device's memory */
} tune_ctx;

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float rng_unit(uint64_t *s)
{
    return (float)((double)(rng_next(s) >> 11) * 0x1p-53 * 2.0 - 1.0);
}

/* 1 if the moe plugin has what tune-moe drives: the `tile` key and get_proc("tuning_table"). */
static int tunable(const sy_plugin_desc *d)
{
    int has_tile = 0;
    for (const sy_key_decl *k = d->keys; k && k->name; k++)
        has_tile |= strcmp(k->name, "tile") == 0;
    return has_tile && d->get_proc && d->get_proc("tuning_table");
}

/* Creates a moe instance with tile (NULL: the built-in tiles) and prepares it for the layer. */
static int open_moe(tune_ctx *c, const char *tile, sy_plugin_inst **out, sy_err *err)
{
    *out = NULL;
    const char *spec = sy_config_get(c->cfg, "moe", "plugin");
    sy_plugin *p = NULL;
    if (sy_loader_resolve(c->ld, SY_KIND_MOE, spec && *spec ? spec : "auto", c->dev->plugin->desc->device,
                          &c->host.api, &p, err))
        return -1;
    if (!tunable(p->desc)) {
        sy_err_set(err, SY_ERR_UNSUPPORTED,
                   "moe plugin %s (%s) has no tuning tables: tune-moe times plugins that declare the key `tile` and "
                   "get_proc(\"tuning_table\") (moe cpu, moe cuda); this one's tiles are fixed in its code",
                   p->desc->name, p->path);
        sy_plugin_close(p);
        return -1;
    }
    char set[160];
    snprintf(set, sizeof set, "moe.tile=%s", tile ? tile : "builtin");
    if (sy_config_set(c->cfg, set, err)) {
        sy_plugin_close(p);
        return -1;
    }
    if (sy_plugin_create(p, &c->host.api, c->cfg, "moe", out, err))
        return -1;
    const sy_moe_ops *ops = (*out)->ops;
    if (ops->prepare((*out)->inst, &c->prob, err) ||
        ops->prepare_layer((*out)->inst, 0, c->layer->exp_gate, c->layer->exp_up, c->layer->exp_down, NULL, err)) {
        sy_plugin_inst_destroy(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

/* Best of reps timings (seconds) of one forward of n tokens, after one untimed forward that warms the caches. */
static double time_forward(tune_ctx *c, sy_plugin_inst *moe, int64_t n, int reps, sy_err *err)
{
    const sy_moe_ops *ops = moe->ops;
    sy_tensor x = sy_tensor_2d(c->x.data, SY_DTYPE_F32, n, c->prob.hidden);
    sy_tensor lg = sy_tensor_2d(c->logits.data, SY_DTYPE_F32, n, c->prob.n_experts);
    sy_tensor out = sy_tensor_2d(c->out.data, SY_DTYPE_F32, n, c->prob.hidden);
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        const double t0 = now_s();
        /* A GPU forward returns once queued: the time is the work's only after synchronize. */
        if (ops->forward(moe->inst, 0, &x, &lg, &out, err) || c->dops->synchronize(c->dev->inst, err))
            return -1;
        const double dt = now_s() - t0;
        if (r > 0 && dt < best)
            best = dt;
    }
    return best;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * rounds of (built-in, candidate) forwards of n tokens back to back. Returns the median of the
 * rounds' ratios candidate / built-in, the best time of each side in *tb, *tc and in *wins the
 * rounds the candidate was faster; -1 on error.
 * A burst of load from elsewhere usually hits both halves of a round; when it hits one, that
 * round's ratio is an outlier the median ignores.
 */
static double ab_rounds(tune_ctx *c, sy_plugin_inst *bi, sy_plugin_inst *cand, int64_t n, int rounds, double *tb,
                        double *tc, int *wins, sy_err *err)
{
    double ratio[2 * 1000 + 1];
    *tb = *tc = 1e30;
    *wins = 0;
    for (int r = 0; r < rounds; r++) {
        const double x = time_forward(c, bi, n, 1, err), y = time_forward(c, cand, n, 1, err);
        if (x < 0 || y < 0)
            return -1;
        *tb = x < *tb ? x : *tb;
        *tc = y < *tc ? y : *tc;
        ratio[r] = y / x;
        *wins += y < x;
    }
    qsort(ratio, (size_t)rounds, sizeof ratio[0], cmp_double);
    return rounds % 2 ? ratio[rounds / 2] : 0.5 * (ratio[rounds / 2 - 1] + ratio[rounds / 2]);
}

static int mkdirs_for(const char *file)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", file);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return 0;
}

static int run(tune_ctx *c)
{
    tune_opts *o = c->o;
    sy_err err = {{0}};
    if (sy_cli_load_config(&o->common, &c->cfg))
        return 1;
    if (sy_loader_from_config(c->cfg, o->common.plugin_dirs[0] ? o->common.plugin_dirs : NULL, NULL, &c->ld, &err)) {
        fprintf(stderr, "switchyard tune-moe: %s\n", err.msg);
        return 1;
    }
    /* The device plugin's worker pool runs the moe plugin's work, as in the engine. */
    sy_plugin *dp = NULL;
    const char *dspec = sy_config_get(c->cfg, "device", "plugin");
    if (sy_loader_resolve(c->ld, SY_KIND_DEVICE, dspec && *dspec ? dspec : "auto", NULL, &c->host.api, &dp, &err) ||
        sy_plugin_create(dp, &c->host.api, c->cfg, "device", &c->dev, &err)) {
        fprintf(stderr, "switchyard tune-moe: device plugin: %s\n", err.msg);
        return 1;
    }
    const sy_plugin_desc *dd = c->dev->plugin->desc;
    c->dops = c->dev->ops;
    if (dd->get_proc) {
        sy_device_parallel_for_fn prun = (sy_device_parallel_for_fn)dd->get_proc("parallel_for");
        sy_device_n_workers_fn nw = (sy_device_n_workers_fn)dd->get_proc("n_workers");
        if (prun && nw)
            sy_host_set_pool(&c->host, prun, nw, c->dev->inst);
    }
    const char *mdir = sy_config_get(c->cfg, "model", "path");
    if (!mdir || !*mdir) {
        fprintf(stderr, "switchyard tune-moe: no model: give --model DIR or [model] path\n");
        return 2;
    }
    if (sy_model_load(mdir, NULL, NULL, &c->model, &err)) {
        fprintf(stderr, "switchyard tune-moe: %s\n", err.msg);
        return 1;
    }
    const sy_model_config *mc = &c->model->cfg;
    for (int l = 0; l < mc->n_layers && !c->layer; l++)
        if (c->model->layers[l].is_moe)
            c->layer = &c->model->layers[l];
    if (!c->layer) {
        fprintf(stderr, "switchyard tune-moe: %s (%s) has no MoE layer to tune\n", mdir, mc->arch_name);
        return 1;
    }
    sy_moe_problem *p = &c->prob;
    p->struct_size = sizeof *p;
    p->n_layers = 1;
    p->n_experts = mc->n_experts;
    p->top_k = mc->top_k;
    p->hidden = mc->hidden;
    p->inter = mc->moe_inter;
    p->scoring = SY_MOE_SOFTMAX;
    p->norm_topk_prob = mc->norm_topk_prob;
    p->routed_scaling_factor = 1.0f;
    p->weight_dtype = c->layer->exp_gate[0].dtype;
    int64_t nmax = 0;
    for (int i = 0; i < o->n_tokens; i++)
        nmax = o->tokens[i] > nmax ? o->tokens[i] : nmax;
    /* Seeded inputs, made on the host and uploaded to the device the moe plugin computes on. */
    float *hx = malloc(sizeof(float) * (size_t)(nmax * p->hidden));
    float *hl = malloc(sizeof(float) * (size_t)(nmax * p->n_experts));
    if (!hx || !hl) {
        free(hx);
        free(hl);
        fprintf(stderr, "switchyard tune-moe: out of memory for %lld tokens\n", (long long)nmax);
        return 1;
    }
    uint64_t seed = 42;
    for (int64_t i = 0; i < nmax * p->hidden; i++)
        hx[i] = rng_unit(&seed);
    for (int64_t i = 0; i < nmax * p->n_experts; i++)
        hl[i] = 2.0f * rng_unit(&seed);
    c->x = sy_tensor_2d(NULL, SY_DTYPE_F32, nmax, p->hidden);
    c->out = sy_tensor_2d(NULL, SY_DTYPE_F32, nmax, p->hidden);
    c->logits = sy_tensor_2d(NULL, SY_DTYPE_F32, nmax, p->n_experts);
    int arc = c->dops->alloc(c->dev->inst, &c->x, &err) || c->dops->alloc(c->dev->inst, &c->out, &err) ||
              c->dops->alloc(c->dev->inst, &c->logits, &err) ||
              c->dops->upload(c->dev->inst, &c->x, hx, sizeof(float) * (size_t)(nmax * p->hidden), &err) ||
              c->dops->upload(c->dev->inst, &c->logits, hl, sizeof(float) * (size_t)(nmax * p->n_experts), &err);
    free(hx);
    free(hl);
    if (arc) {
        fprintf(stderr, "switchyard tune-moe: inputs of %lld tokens on device %s: %s\n", (long long)nmax, dd->name,
                err.msg);
        return 1;
    }

    /* The built-in tiles: the baseline every candidate is timed against, kept open throughout. */
    sy_plugin_inst *bi = NULL, *moe = NULL;
    if (open_moe(c, NULL, &bi, &err)) {
        fprintf(stderr, "switchyard tune-moe: moe plugin: %s\n", err.msg);
        return 1;
    }
    const tuning_table_fn where = (tuning_table_fn)bi->plugin->desc->get_proc("tuning_table");
    char path[4096];
    const char *src = NULL;
    double base[MAX_BUCKETS], cand[MAX_BUCKETS], speed[MAX_BUCKETS];
    int won[MAX_BUCKETS];
    char best_tile[MAX_BUCKETS][64], cand_tile[MAX_BUCKETS][64];
    /* The sweep's shortlist per bucket: the SHORTLIST best ratios candidate / built-in. */
    double short_ratio[MAX_BUCKETS][SHORTLIST];
    char short_tile[MAX_BUCKETS][SHORTLIST][64];
    for (int b = 0; b < o->n_tokens; b++) {
        if (time_forward(c, bi, o->tokens[b], 1, &err) < 0) {
            fprintf(stderr, "switchyard tune-moe: forward of %lld tokens: %s\n", (long long)o->tokens[b], err.msg);
            sy_plugin_inst_destroy(bi);
            return 1;
        }
        for (int k = 0; k < SHORTLIST; k++) {
            short_ratio[b][k] = 1e30;
            short_tile[b][k][0] = '\0';
        }
    }

    /* Candidates: --tiles, else token blocks x column widths x {all workers, one worker}.
     * Token blocks include multiples of 6, the rows of x per micro-tile of the avx512 kernels (F32 and
     * BF16 dot): a block of 12 keeps two whole micro-tiles' rows in L1 while the weight panel comes
     * from L2, which is what won on the bench MoE (docs/benchmarks.md, "MoE tuning"). */
    static const int tbs[] = {1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
    static const int nbs[] = {0, 32, 64, 128, 192, 256, 384, 512};
    const int nthreads = c->host.pool_n_workers ? c->host.pool_n_workers(c->host.pool_inst) : 1;
    const tile_candidates_fn own = (tile_candidates_fn)bi->plugin->desc->get_proc("tile_candidates");
    char cands[MAX_CANDIDATES][64];
    int n_cands = 0;
    if (o->tiles) {
        const char *q = o->tiles;
        while (*q) {
            while (*q == ' ')
                q++;
            size_t len = strcspn(q, " ");
            if (len == 0)
                break;
            if (len >= sizeof cands[0] || n_cands == MAX_CANDIDATES) {
                fprintf(stderr, "switchyard tune-moe: --tiles expects up to %d tiles tb,nb,thr, found \"%s\"\n",
                        MAX_CANDIDATES, o->tiles);
                sy_plugin_inst_destroy(bi);
                return 2;
            }
            snprintf(cands[n_cands++], sizeof cands[0], "%.*s", (int)len, q);
            q += len;
        }
    } else if (own) {
        const char *names[MAX_CANDIDATES];
        const int n = own(bi->inst, names, MAX_CANDIDATES);
        for (int i = 0; i < n && n_cands < MAX_CANDIDATES; i++)
            snprintf(cands[n_cands++], sizeof cands[0], "%.63s", names[i]);
    } else {
        for (size_t ti = 0; ti < sizeof tbs / sizeof tbs[0]; ti++)
            for (size_t ni = 0; ni < sizeof nbs / sizeof nbs[0]; ni++)
                for (int th = 0; th < (nthreads > 1 ? 2 : 1) && n_cands < MAX_CANDIDATES; th++)
                    snprintf(cands[n_cands++], sizeof cands[0], "%d,%d,%d", tbs[ti], nbs[ni], th ? 1 : 0);
    }
    /*
     * Sweep: each candidate against the built-in tiles in alternation, reps rounds, ranked by the ratio of
     * the two bests. Load from elsewhere on the machine (other jobs, often 2x on a shared VM) comes and
     * goes in bursts longer than a forward, so it hits both sides of a round alike; ranking raw times
     * instead picks whichever candidate ran in a quiet moment.
     */
    int tried = 0, refused = 0;
    for (int ci = 0; ci < n_cands; ci++) {
        const char *tile = cands[ci];
        if (open_moe(c, tile, &moe, &err)) {
            refused++; /* does not fit this device (the plugin's check), reported below */
            if (o->common.verbosity > 0)
                fprintf(stderr, "  tile %s refused: %s\n", tile, err.msg);
            continue;
        }
        tried++;
        if (o->common.verbosity > 0)
            fprintf(stderr, "  tile %-14s", tile);
        for (int b = 0; b < o->n_tokens; b++) {
            double tb, tc;
            int wins;
            const double ratio = ab_rounds(c, bi, moe, o->tokens[b], o->reps, &tb, &tc, &wins, &err);
            if (ratio < 0)
                continue;
            if (o->common.verbosity > 0)
                fprintf(stderr, " %lld:%.3f/%.3f", (long long)o->tokens[b], tc * 1e3, tb * 1e3);
            /* Insert into the bucket's shortlist (sorted ascending). */
            for (int k = 0; k < SHORTLIST; k++)
                if (ratio < short_ratio[b][k]) {
                    for (int j = SHORTLIST - 1; j > k; j--) {
                        short_ratio[b][j] = short_ratio[b][j - 1];
                        memcpy(short_tile[b][j], short_tile[b][j - 1], sizeof short_tile[b][j]);
                    }
                    short_ratio[b][k] = ratio;
                    snprintf(short_tile[b][k], sizeof short_tile[b][k], "%.63s", tile);
                    break;
                }
        }
        if (o->common.verbosity > 0)
            fprintf(stderr, " ms (tuned/built-in)\n");
        sy_plugin_inst_destroy(moe);
    }
    if (tried == 0) {
        fprintf(stderr, "switchyard tune-moe: every candidate tile was refused: %s\n", err.msg);
        sy_plugin_inst_destroy(bi);
        return 1;
    }
    /* Where the table goes: the plugin says. */
    if (where(bi->inst, path, sizeof path, &src)) {
        fprintf(stderr, "switchyard tune-moe: moe plugin %s cannot say where its table goes\n", bi->plugin->desc->name);
        sy_plugin_inst_destroy(bi);
        return 1;
    }
    const char *file = o->out ? o->out : path;

    /* Confirm the shortlist against the built-in tiles, 2 x reps more alternating rounds each; these are the
     * numbers printed and recorded. */
    for (int b = 0; b < o->n_tokens; b++) {
        base[b] = cand[b] = 1e30;
        double best_ratio = 1e30;
        won[b] = 0;
        snprintf(cand_tile[b], sizeof cand_tile[b], "built-in");
        for (int k = 0; k < SHORTLIST && short_tile[b][k][0]; k++) {
            if (open_moe(c, short_tile[b][k], &moe, &err)) {
                fprintf(stderr, "switchyard tune-moe: moe plugin: %s\n", err.msg);
                sy_plugin_inst_destroy(bi);
                return 1;
            }
            double tb, tc;
            int wins;
            const double ratio = ab_rounds(c, bi, moe, o->tokens[b], 2 * o->reps, &tb, &tc, &wins, &err);
            sy_plugin_inst_destroy(moe);
            if (ratio < 0) {
                fprintf(stderr, "switchyard tune-moe: forward of %lld tokens: %s\n", (long long)o->tokens[b], err.msg);
                sy_plugin_inst_destroy(bi);
                return 1;
            }
            if (ratio < best_ratio) {
                best_ratio = ratio;
                won[b] = wins;
                base[b] = tb;
                cand[b] = tc;
                snprintf(cand_tile[b], sizeof cand_tile[b], "%s", short_tile[b][k]);
            }
        }
        speed[b] = best_ratio < 1e29 ? 1.0 / best_ratio : 1.0;
        /*
         * Kept when 3% ahead in the median round and faster in clearly more than half of the rounds (a sign
         * test: at least half + sqrt(rounds), about two standard deviations of a coin); otherwise noise:
         * keep built-in. The best times are printed but do not decide: under load, one lucky quiet
         * moment sets them.
         */
        const int rounds = 2 * o->reps;
        const int keep = best_ratio < 0.97 && won[b] >= rounds / 2.0 + sqrt((double)rounds);
        snprintf(best_tile[b], sizeof best_tile[b], "%s", keep ? cand_tile[b] : "built-in");
    }
    char bi_name[64];
    snprintf(bi_name, sizeof bi_name, "%s", bi->plugin->desc->name);
    /* What ran, not what was asked: matmul = auto is bf16 or f32 by CPU. moe cpu's get_proc("matmul") gives its
     * start-up line, "matmul = <asked>: bf16 on ..." or "...: f32..." (plugins/common/cpu/sykmatmul.h). */
    const char *(*line_fn)(void *) = NULL;
    void *sym = bi->plugin->desc->get_proc ? bi->plugin->desc->get_proc("matmul") : NULL;
    memcpy(&line_fn, &sym, sizeof line_fn);
    const char *line = line_fn ? line_fn(bi->inst) : NULL, *mm = sy_config_get(c->cfg, "moe", "matmul");
    const char *ran = line ? (strstr(line, ": bf16 on ") ? "bf16" : "f32") : mm && *mm ? mm : "f32";
    sy_plugin_inst_destroy(bi);

    printf("# switchyard tune-moe: %s, E=%d N=%d K=%d top-%d %s, %d workers, %d candidates (%d refused); "
           "built-in vs tuned: %d alternating rounds for each of the sweep's best %d (ms: best of each side; "
           "speedup: median of the rounds' ratios)\n",
           mdir, p->n_experts, p->inter, p->hidden, p->top_k, sy_dtype_name(p->weight_dtype), nthreads, tried,
           refused, 2 * o->reps, SHORTLIST);
    printf("%8s %14s %18s %14s %9s %7s  %s\n", "tokens", "built-in ms", own ? "tile" : "tile (tb,nb,thr)",
           "tuned ms", "speedup", "won", "kept");
    for (int b = 0; b < o->n_tokens; b++)
        printf("%8lld %14.3f %18s %14.3f %8.2fx %3d/%-3d  %s\n", (long long)o->tokens[b], base[b] * 1e3, cand_tile[b],
               cand[b] * 1e3, speed[b], won[b], 2 * o->reps, strcmp(best_tile[b], "built-in") ? "tuned" : "built-in (not ahead)");
    if (o->dry_run)
        return 0;
    if (mkdirs_for(file) != 0) {
        fprintf(stderr, "switchyard tune-moe: cannot create the directories of %s: %s\n", file, strerror(errno));
        return 1;
    }
    FILE *f = fopen(file, "w");
    if (!f) {
        fprintf(stderr, "switchyard tune-moe: cannot write %s: %s\n", file, strerror(errno));
        return 1;
    }
    fprintf(f, "; MoE tuning table written by `switchyard tune-moe` (format: plugins/common/moe/sytune.h)\n");
    fprintf(f, "; timed on %s with %d workers, %d alternating rounds; built-in vs tuned per bucket in the comments\n",
            mdir, nthreads, 2 * o->reps);
    fprintf(f, "[table]\ntool = switchyard tune-moe\n");
    if (own) {
        fprintf(f, "device = %s   ; the moe plugin it was timed with\n", bi_name);
    } else {
        fprintf(f, "matmul = %s   ; the [moe] matmul it was timed with\n", ran);
    }
    fprintf(f, "experts = %d\nn = %d\nk = %d\ndtype = %s\n", p->n_experts, p->inter, p->hidden,
            sy_dtype_name(p->weight_dtype));
    for (int b = 0; b < o->n_tokens; b++) {
        if (own) { /* the plugin's own tile names; builtin: its default */
            fprintf(f, "\n[tokens=%lld]  ; built-in %.3f ms, %s %.3f ms, median speedup %.2fx, won %d of %d rounds\n"
                    "tile = %s\n", (long long)o->tokens[b], base[b] * 1e3, cand_tile[b], cand[b] * 1e3, speed[b],
                    won[b], 2 * o->reps, strcmp(best_tile[b], "built-in") ? best_tile[b] : "builtin");
            continue;
        }
        long long tb = 0, nb = 0, th = 0; /* built-in: token_block 0 */
        if (sscanf(best_tile[b], "%lld,%lld,%lld", &tb, &nb, &th) != 3)
            tb = nb = th = 0;
        fprintf(f, "\n[tokens=%lld]  ; built-in %.3f ms, %s %.3f ms, median speedup %.2fx, won %d of %d rounds\n"
                "token_block = %lld\nn_block = %lld\nthreads = %lld\n", (long long)o->tokens[b], base[b] * 1e3,
                cand_tile[b], cand[b] * 1e3, speed[b], won[b], 2 * o->reps, tb, nb, th);
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "switchyard tune-moe: write failed on %s: %s\n", file, strerror(errno));
        return 1;
    }
    printf("wrote %s\n", file);
    return 0;
}

int sy_cmd_tune_moe(int argc, char **argv)
{
    tune_opts o;
    memset(&o, 0, sizeof o);
    if (parse_args(argc, argv, &o))
        return 2;
    tune_ctx c;
    memset(&c, 0, sizeof c);
    c.o = &o;
    sy_host_init(&c.host);
    /* One line per candidate instance would bury the table: warnings only, unless -v. */
    sy_log_set_level(o.common.verbosity < 0 ? SY_LOG_ERROR : o.common.verbosity > 0 ? SY_LOG_DEBUG : SY_LOG_WARN);
    const int rc = run(&c);
    sy_tensor *bufs[] = {&c.x, &c.out, &c.logits};
    for (size_t i = 0; c.dev && i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]->data)
            c.dops->free(c.dev->inst, bufs[i]);
    sy_model_free(c.model);
    if (c.dev)
        sy_plugin_inst_destroy(c.dev);
    if (c.ld)
        sy_loader_free(c.ld);
    if (c.cfg)
        sy_config_free(c.cfg);
    sy_host_fini(&c.host);
    return rc;
}
