/*
 * sy_model_load: config + safetensors -> sy_model.
 *
 * Every role of the family's row in the architecture table is looked up by
 * its checkpoint name, checked (float dtype, exact shape from the config)
 * and bound as a view into the mmap'd files, in the checkpoint's own dtype.
 * Then the bound bytes are faulted in, in file order, while the progress
 * callback reports: the time a load takes is spent here, where it can be
 * shown, rather than inside the first plugin that reads a weight.
 */
#include "config.h"

#include "model/model.h"

#include "model/model_arch.h"
#include "model/model_quant.h"
#include "model/safetensors.h"
#include "util/log.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct load_ctx {
    sy_model *m;
    const sy_arch_desc *arch;
    const sy_st_entry **bound; /* every tensor bound, once */
    size_t n_bound, cap_bound;
    uint8_t *used; /* [sy_st_count], indexed like sy_st_at */
    bool load_mtp; /* bind the MTP layers too */
    sy_err *err;
    /* Entries a bind_experts hook copied (not paged in with the rest): their parameters and bytes. */
    uint64_t copied_params, copied_bytes;
    size_t n_copied;
} load_ctx;

/* N of a "model.layers.N." name; -1 for any other name. */
static long name_layer(const char *name)
{
    static const char prefix[] = "model.layers.";
    if (strncmp(name, prefix, sizeof prefix - 1) != 0)
        return -1;
    const char *p = name + sizeof prefix - 1;
    char *end;
    if (*p < '0' || *p > '9')
        return -1;
    long l = strtol(p, &end, 10);
    return *end == '.' ? l : -1;
}

/* A tensor of one of the MTP layers stored after the decoder layers. */
static bool is_mtp_name(const char *name, void *arg)
{
    const sy_model_config *cfg = arg;
    long l = name_layer(name);
    return l >= cfg->n_layers && l < (long)cfg->n_layers + cfg->n_mtp_layers;
}

static void shape_str(char *buf, size_t cap, const int64_t *shape, int ndim)
{
    size_t o = 0;
    o += (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "]");
}

/* "query projection of layer 3" and the like. */
static void role_where(char *buf, size_t cap, const sy_role_desc *rd, int layer, int expert)
{
    if (rd->scope == SY_SCOPE_MODEL)
        snprintf(buf, cap, "%s", rd->what);
    else if (rd->scope == SY_SCOPE_LAYER)
        snprintf(buf, cap, "%s of layer %d", rd->what, layer);
    else
        snprintf(buf, cap, "%s of layer %d, expert %d", rd->what, layer, expert);
}

static int check_shape(load_ctx *c, const sy_role_desc *rd, const char *file, const char *name, const sy_tensor *t)
{
    const sy_model_config *cfg = &c->m->cfg;
    int64_t want[SY_ROLE_MAX_DIMS] = {0};
    int nd = 0;
    while (nd < SY_ROLE_MAX_DIMS && rd->shape[nd] != SY_DIM_NONE) {
        want[nd] = sy__model_dim_value(cfg, rd->shape[nd]);
        nd++;
    }
    bool ok = t->ndim == nd;
    for (int i = 0; ok && i < nd; i++)
        ok = t->shape[i] == want[i];
    if (ok)
        return SY_OK;
    char got_s[96], want_s[96], names[160];
    shape_str(got_s, sizeof got_s, t->shape, t->ndim);
    shape_str(want_s, sizeof want_s, want, nd);
    size_t o = (size_t)snprintf(names, sizeof names, "[");
    for (int i = 0; i < nd && o < sizeof names; i++)
        o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", i ? ", " : "", sy__model_dim_name(cfg, rd->shape[i]));
    if (o < sizeof names)
        snprintf(names + o, sizeof names - o, "]");
    return sy_err_set(c->err, SY_ERR_INVALID, "%s: tensor '%s' has shape %s, but config.json implies %s = %s", file,
                      name, got_s, names, want_s);
}

/* Records e as read by the model (unused-tensor report, fault-in, byte count). */
static int mark_bound(load_ctx *c, const sy_st_entry *e, const char *name)
{
    c->used[(size_t)(e - sy_st_at(c->m->st, 0))] = 1;
    if (c->n_bound == c->cap_bound) {
        size_t nc = c->cap_bound ? c->cap_bound * 2 : 256;
        const sy_st_entry **nb = realloc(c->bound, nc * sizeof *nb);
        if (!nb)
            return sy_err_set(c->err, SY_ERR_NOMEM, "out of memory binding '%s'", name);
        c->bound = nb;
        c->cap_bound = nc;
    }
    c->bound[c->n_bound++] = e;
    return SY_OK;
}

static int bind(load_ctx *c, sy_role r, int layer, int expert)
{
    const sy_role_desc *rd = sy__model_role_desc(r);
    const char *pattern = c->arch->tensors[r];
    char where[128];
    role_where(where, sizeof where, rd, layer, expert);
    if (!pattern)
        return sy_err_set(c->err, SY_ERR_UNSUPPORTED, "%s: the config needs a %s, which %s checkpoints do not have",
                          c->m->dir, where, c->arch->hf_name);
    char name[512];
    if (sy__model_tensor_name(name, sizeof name, pattern, layer, expert) != 0)
        return sy_err_set(c->err, SY_ERR_INTERNAL, "tensor name for %s is too long", where);
    const sy_st_entry *e = sy_st_find(c->m->st, name);
    if (!e && rd->when == SY_WHEN_MTP_IF_PRESENT) /* the caller falls back to the model's own tensor */
        return SY_OK;
    if (!e)
        return sy_err_set(c->err, SY_ERR_INVALID, "tensor '%s' (%s) is missing from the checkpoint in %s", name, where,
                          c->m->dir);
    const char *file = sy_st_file_path(c->m->st, e->file);
    const char *slash = file ? strrchr(file, '/') : NULL;
    file = slash ? slash + 1 : file ? file : "?";
    sy_dtype dt = e->view.dtype;
    sy_tensor view = e->view;
    const sy_st_entry *scales[4];
    int n_scales = 0;
    if (dt == SY_DTYPE_FP8_E4M3 || dt == SY_DTYPE_U8) { /* quantised: the view gains its scales (model_quant.c) */
        int qrc = sy_model_quant_bind(c->m->quant, c->m->st, file, name, e, &view, scales, &n_scales, c->err);
        if (qrc != SY_OK)
            return qrc;
    } else if (dt != SY_DTYPE_F32 && dt != SY_DTYPE_F16 && dt != SY_DTYPE_BF16) {
        return sy_err_set(c->err, SY_ERR_UNSUPPORTED,
                          "%s: tensor '%s' has dtype %s; weights must be F32, F16 or BF16, or F8_E4M3 / U8 (NVFP4) "
                          "with their scales",
                          file, name, sy_dtype_name(dt));
    }
    int rc = check_shape(c, rd, file, name, &view);
    if (rc != SY_OK)
        return rc;
    sy_tensor *slot = sy__model_role_slot(c->m, r, layer, expert);
    if (!slot)
        return sy_err_set(c->err, SY_ERR_INTERNAL, "no slot for %s", where);
    *slot = view;
    for (int i = 0; i < n_scales; i++) {
        size_t si = (size_t)(scales[i] - sy_st_at(c->m->st, 0));
        if (c->used[si])
            continue;
        if ((rc = mark_bound(c, scales[i], name)) != SY_OK)
            return rc;
    }
    size_t idx = (size_t)(e - sy_st_at(c->m->st, 0));
    if (c->used[idx])
        return SY_OK;
    return mark_bound(c, e, name);
}

/* Parameters of a bound entry: scales are not parameters; a packed FP4 byte holds two. */
static uint64_t entry_params(const sy_model *m, const sy_st_entry *e)
{
    if (sy_model_quant_is_scale(e->name))
        return 0;
    const bool fp4 = (m->quant->method == SY_QUANT_NVFP4 || m->quant->method == SY_QUANT_MXFP4) &&
                     e->view.dtype == SY_DTYPE_U8;
    return (uint64_t)sy_tensor_numel(&e->view) * (fp4 ? 2u : 1u);
}

/* sy_expert_binder.mark: the hook read e (fault_in: page it in with the bound tensors). */
static int binder_mark(sy_expert_binder *b, const sy_st_entry *e, bool fault_in)
{
    load_ctx *c = b->ctx;
    const size_t idx = (size_t)(e - sy_st_at(c->m->st, 0));
    if (c->used[idx])
        return SY_OK;
    if (fault_in)
        return mark_bound(c, e, e->name);
    c->used[idx] = 1;
    c->n_copied++;
    c->copied_params += entry_params(c->m, e);
    c->copied_bytes += e->nbytes;
    return SY_OK;
}

static int alloc_layers(sy_model *m, sy_err *err)
{
    const sy_model_config *cfg = &m->cfg;
    m->layers = calloc((size_t)cfg->n_layers, sizeof *m->layers);
    if (!m->layers)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory for %d layers", cfg->n_layers);
    for (int l = 0; l < cfg->n_layers; l++) {
        sy_layer_weights *lw = &m->layers[l];
        lw->is_moe = cfg->layer_is_moe[l] != 0;
        if (!lw->is_moe)
            continue;
        size_t n = (size_t)cfg->n_experts;
        lw->exp_gate = calloc(n, sizeof(sy_tensor));
        lw->exp_up = calloc(n, sizeof(sy_tensor));
        lw->exp_down = calloc(n, sizeof(sy_tensor));
        if (!lw->exp_gate || !lw->exp_up || !lw->exp_down)
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory for the experts of layer %d", l);
    }
    return SY_OK;
}

/* The MTP layers' slots, with their experts when the model has experts. */
static int alloc_mtp(sy_model *m, sy_err *err)
{
    const sy_model_config *cfg = &m->cfg;
    m->mtp = calloc((size_t)cfg->n_mtp_layers, sizeof *m->mtp);
    if (!m->mtp)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory for %d MTP layers", cfg->n_mtp_layers);
    m->n_mtp = cfg->n_mtp_layers;
    for (int i = 0; i < m->n_mtp; i++) {
        sy_layer_weights *lw = &m->mtp[i].block;
        lw->is_moe = cfg->n_experts > 0;
        if (!lw->is_moe)
            continue;
        size_t n = (size_t)cfg->n_experts;
        lw->exp_gate = calloc(n, sizeof(sy_tensor));
        lw->exp_up = calloc(n, sizeof(sy_tensor));
        lw->exp_down = calloc(n, sizeof(sy_tensor));
        if (!lw->exp_gate || !lw->exp_up || !lw->exp_down)
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory for the experts of MTP layer %d", i);
    }
    return SY_OK;
}

/*
 * Layers n_layers .. n_layers + n_mtp - 1, through the same roles (and
 * shape checks) as the decoder layers, plus the MTP-only ones. A layer
 * without its own embedding or head uses the model's (GLM-4.6 ships none).
 */
static int bind_mtp(load_ctx *c)
{
    sy_model *m = c->m;
    const sy_model_config *cfg = &m->cfg;
    if (c->arch->bind_experts && cfg->n_experts > 0)
        return sy_err_set(c->err, SY_ERR_UNSUPPORTED, "%s: MTP layers of %s (fused experts) are not supported",
                          m->dir, c->arch->hf_name);
    for (int i = 0; i < m->n_mtp; i++) {
        const int l = cfg->n_layers + i;
        for (int r = 0; r < SY_ROLE_COUNT; r++) {
            const sy_role_desc *rd = sy__model_role_desc((sy_role)r);
            int rc = SY_OK;
            if (rd->scope == SY_SCOPE_MODEL)
                continue;
            if (rd->when == SY_WHEN_MTP_IF_PRESENT)
                rc = bind(c, (sy_role)r, l, -1);
            else if (!sy__model_role_needed(cfg, (sy_role)r, l))
                continue;
            else if (rd->scope == SY_SCOPE_LAYER)
                rc = bind(c, (sy_role)r, l, -1);
            else
                for (int e = 0; e < cfg->n_experts && rc == SY_OK; e++)
                    rc = bind(c, (sy_role)r, l, e);
            if (rc != SY_OK)
                return rc;
        }
        sy_mtp_layer *mt = &m->mtp[i];
        if (!mt->head.data)
            mt->head = m->lm_head;
        if (!mt->embed.data)
            mt->embed = m->embed;
    }
    return SY_OK;
}

static int bind_all(load_ctx *c)
{
    const sy_model_config *cfg = &c->m->cfg;
    for (int r = 0; r < SY_ROLE_COUNT; r++) {
        const sy_role_desc *rd = sy__model_role_desc((sy_role)r);
        int rc = SY_OK;
        if (rd->scope == SY_SCOPE_MODEL) {
            if (sy__model_role_needed(cfg, (sy_role)r, 0))
                rc = bind(c, (sy_role)r, -1, -1);
            if (rc != SY_OK)
                return rc;
            continue;
        }
        if (rd->scope == SY_SCOPE_EXPERT && c->arch->bind_experts)
            continue; /* fused expert tensors: below */
        for (int l = 0; l < cfg->n_layers && rc == SY_OK; l++) {
            if (!sy__model_role_needed(cfg, (sy_role)r, l))
                continue;
            if (rd->scope == SY_SCOPE_LAYER)
                rc = bind(c, (sy_role)r, l, -1);
            else
                for (int e = 0; e < cfg->n_experts && rc == SY_OK; e++)
                    rc = bind(c, (sy_role)r, l, e);
        }
        if (rc != SY_OK)
            return rc;
    }
    if (c->arch->bind_experts) {
        sy_expert_binder b = {.m = c->m, .mark = binder_mark, .ctx = c, .err = c->err};
        for (int l = 0; l < cfg->n_layers; l++) {
            int rc = cfg->layer_is_moe[l] ? c->arch->bind_experts(&b, l) : SY_OK;
            if (rc != SY_OK)
                return rc;
        }
    }
    if (cfg->tie_embeddings)
        c->m->lm_head = c->m->embed;
    return SY_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Tensors nothing reads usually mean a config flag we do not honour. */
static void report_unused(load_ctx *c)
{
    size_t n = sy_st_count(c->m->st), n_unused = 0, n_mtp = 0;
    const char *first = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *name = sy_st_at(c->m->st, i)->name;
        if (c->used[i] || ends_with(name, "rotary_emb.inv_freq") ||
            (c->m->cfg.tie_embeddings && strcmp(name, "lm_head.weight") == 0))
            continue;
        if (!c->load_mtp && is_mtp_name(name, &c->m->cfg)) { /* skipped on purpose, not a missed flag */
            n_mtp++;
            continue;
        }
        if (!n_unused)
            first = name;
        n_unused++;
    }
    if (n_mtp)
        sy_debug("%s: skipped the %zu tensors of %d MTP layers (not asked for)", c->m->dir, n_mtp,
                 c->m->cfg.n_mtp_layers);
    if (n_unused)
        sy_warn("%s: %zu tensors in the checkpoint are not used by %s (first: '%s')", c->m->dir, n_unused,
                c->m->cfg.arch_name, first);
}

static int cmp_entry_pos(const void *a, const void *b)
{
    const sy_st_entry *x = *(const sy_st_entry *const *)a, *y = *(const sy_st_entry *const *)b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    uintptr_t px = (uintptr_t)x->view.data, py = (uintptr_t)y->view.data;
    return px < py ? -1 : px > py;
}

/* Reads one byte per page of every bound tensor, in file order. */
static void fault_in(load_ctx *c, sy_load_progress_fn progress, void *arg)
{
    qsort(c->bound, c->n_bound, sizeof *c->bound, cmp_entry_pos);
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < c->n_bound; i++)
        total += c->bound[i]->nbytes;
    if (progress)
        progress(arg, 0, c->n_bound, 0, total);
    unsigned char sink = 0;
    for (size_t i = 0; i < c->n_bound; i++) {
        const sy_st_entry *e = c->bound[i];
        uintptr_t start = (uintptr_t)e->view.data, end = start + (uintptr_t)e->nbytes;
        if (end > start) {
            uintptr_t first = start & ~(page - 1);
            (void)madvise((void *)first, end - first, MADV_WILLNEED);
            const volatile unsigned char *p = (const volatile unsigned char *)e->view.data;
            sink ^= p[0];
            for (uintptr_t a = first + page; a < end; a += page)
                sink ^= p[a - start];
        }
        done += e->nbytes;
        if (progress)
            progress(arg, i + 1, c->n_bound, done, total);
    }
    (void)sink;
}

int sy_model_load(const char *dir, sy_load_progress_fn progress, void *progress_arg, sy_model **out, sy_err *err)
{
    const sy_model_load_opts o = {.progress = progress, .progress_arg = progress_arg};
    return sy_model_load_with(dir, &o, out, err);
}

int sy_model_load_with(const char *dir, const sy_model_load_opts *opts, sy_model **out, sy_err *err)
{
    static const sy_model_load_opts defaults = {0};
    if (!opts)
        opts = &defaults;
    sy_load_progress_fn progress = opts->progress;
    void *progress_arg = opts->progress_arg;
    *out = NULL;
    sy_model *m = calloc(1, sizeof *m);
    if (!m)
        return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", dir);
    load_ctx c = {.m = m, .load_mtp = opts->load_mtp, .err = err};
    double t0 = sy_now();
    int rc = SY_OK;
    if (snprintf(m->dir, sizeof m->dir, "%s", dir) >= (int)sizeof m->dir) {
        rc = sy_err_set(err, SY_ERR_INVALID, "model path is too long (%zu bytes)", strlen(dir));
        goto fail;
    }
    rc = sy_model_config_load(dir, &m->cfg, err);
    if (rc != SY_OK)
        goto fail;
    m->quant = calloc(1, sizeof *m->quant);
    if (!m->quant) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", dir);
        goto fail;
    }
    rc = sy_model_quant_load(dir, m->quant, err);
    if (rc != SY_OK)
        goto fail;
    c.arch = sy__model_arch_find(m->cfg.arch_name);
    if (!c.arch) {
        rc = sy_err_set(err, SY_ERR_INTERNAL, "%s: architecture '%s' vanished from the table", dir,
                        m->cfg.arch_name);
        goto fail;
    }
    /* Unless asked for, the MTP layers' shards are not even opened: a checkpoint served without speculative
     * decoding loads with them deleted, or unreadable. */
    const bool skip_mtp = !c.load_mtp && m->cfg.n_mtp_layers > 0;
    rc = sy_st_open_dir_skip(dir, skip_mtp ? is_mtp_name : NULL, &m->cfg, &m->st, err);
    if (rc == SY_OK)
        rc = alloc_layers(m, err);
    if (rc == SY_OK && c.load_mtp && m->cfg.n_mtp_layers > 0)
        rc = alloc_mtp(m, err);
    if (rc != SY_OK)
        goto fail;
    c.used = calloc(sy_st_count(m->st) + 1, 1);
    if (!c.used) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", dir);
        goto fail;
    }
    rc = bind_all(&c);
    if (rc == SY_OK && m->n_mtp > 0)
        rc = bind_mtp(&c);
    if (rc != SY_OK)
        goto fail;
    report_unused(&c);
    m->n_params = c.copied_params;
    m->weight_bytes = c.copied_bytes;
    for (size_t i = 0; i < c.n_bound; i++) {
        m->n_params += entry_params(m, c.bound[i]);
        m->weight_bytes += c.bound[i]->nbytes;
    }
    fault_in(&c, progress, progress_arg);
    sy_info("loaded %s: %s, %d layers, %llu parameters, %.1f MiB in %zu tensors%s%s (%.2f s)", dir,
            m->cfg.arch_name, m->cfg.n_layers, (unsigned long long)m->n_params,
            (double)m->weight_bytes / (1024.0 * 1024.0), c.n_bound + c.n_copied,
            m->quant->method ? ", quantised " : "", m->quant->method ? sy_quant_method_name(m->quant->method) : "",
            sy_now() - t0);
    free(c.bound);
    free(c.used);
    *out = m;
    return SY_OK;
fail:
    free(c.bound);
    free(c.used);
    sy_model_free(m);
    return rc;
}

void sy_model_free(sy_model *m)
{
    if (!m)
        return;
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layers; l++) {
            free(m->layers[l].exp_gate);
            free(m->layers[l].exp_up);
            free(m->layers[l].exp_down);
            free(m->layers[l].exp_gate_bias);
            free(m->layers[l].exp_up_bias);
            free(m->layers[l].exp_down_bias);
        }
        free(m->layers);
    }
    if (m->mtp) {
        for (int i = 0; i < m->n_mtp; i++) {
            free(m->mtp[i].block.exp_gate);
            free(m->mtp[i].block.exp_up);
            free(m->mtp[i].block.exp_down);
        }
        free(m->mtp);
    }
    for (size_t i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    sy_model_config_free(&m->cfg);
    if (m->quant) {
        sy_model_quant_free(m->quant);
        free(m->quant);
    }
    sy_st_close(m->st);
    free(m);
}

const char *sy_model_tensor_name(const sy_model *m, const sy_tensor *t)
{
    if (!m || !m->st || !t || !t->data)
        return NULL;
    size_t n = sy_st_count(m->st);
    for (size_t i = 0; i < n; i++) {
        const sy_st_entry *e = sy_st_at(m->st, i);
        /* NVFP4 views are U8 in the file, FP4_E2M1 once bound */
        if (e->view.data == t->data &&
            (e->view.dtype == t->dtype || (e->view.dtype == SY_DTYPE_U8 && t->dtype == SY_DTYPE_FP4_E2M1)))
            return e->name;
    }
    return NULL;
}
