/*
 * example-comm: a comm plugin that counts the collectives it is asked for
 * and the bytes they move, and either forms a group of one by itself or
 * forwards every op to another comm plugin (key `inner`, the path of its
 * .so, e.g. the installed comm-shm.so). The counts go to the host's metrics
 * (example_comm_calls, example_comm_bytes) and to one log line when the
 * instance is destroyed.
 *
 * Build: cc -shared -fPIC $(pkg-config --cflags switchyard-plugin) example_comm.c -o example-comm.so -ldl
 * Use:   [comm]
 *        plugin = /path/to/example-comm.so
 *        inner = /usr/lib/switchyard/plugins/comm-shm.so   ; optional
 */
#include <switchyard/plugin.h>

#include <dlfcn.h>

typedef struct comm {
    const sy_host *host;
    const sy_plugin_desc *inner; /* NULL: a group of one */
    const sy_comm_ops *io;
    void *ii;
    long long calls, bytes;
} comm;

static const sy_key_decl keys[] = {
    {"inner", SY_KEY_STRING, "", "comm plugin (.so path) to forward to; empty: a group of one", 1, 0, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};

static int probe(const sy_host *host, sy_err *why)
{
    (void)host;
    (void)why;
    return 1; /* an example: never the best choice for `auto` */
}

/* Loads the plugin to forward to; it stays loaded, as the core keeps plugins. */
static int open_inner(comm *c, const char *path, sy_err *err)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return sy_err_set(err, SY_ERR_IO, "example-comm: inner = %s: %s", path, dlerror());
    void *sym = dlsym(dl, SY_PLUGIN_ENTRY_NAME);
    sy_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const sy_plugin_desc *d = sym ? entry() : NULL;
    if (!d || d->abi_major != SY_ABI_MAJOR || d->kind != SY_KIND_COMM)
        return sy_err_set(err, SY_ERR_INVALID, "example-comm: inner = %s: expected a comm plugin of ABI %d", path,
                          SY_ABI_MAJOR);
    /* The inner plugin gets no keys of its own: its defaults. */
    int rc = d->create(c->host, NULL, 0, &c->ii, err);
    if (rc)
        return rc;
    c->inner = d;
    c->io = d->ops;
    return SY_OK;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    comm *c = host->alloc(host->ctx, sizeof *c, sizeof(void *));
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "example-comm: out of memory");
    memset(c, 0, sizeof *c);
    c->host = host;
    const char *inner = sy_kv_get(cfg, n_cfg, "inner");
    if (inner && *inner) {
        int rc = open_inner(c, inner, err);
        if (rc) {
            host->free(host->ctx, c);
            return rc;
        }
    }
    *out = c;
    return SY_OK;
}

static void destroy(void *inst)
{
    comm *c = inst;
    sy_logf(c->host, SY_LOG_INFO, "example-comm", "%lld collectives, %lld bytes", c->calls, c->bytes);
    if (c->inner)
        c->inner->destroy(c->ii);
    c->host->free(c->host->ctx, c);
}

static void count(comm *c, size_t bytes)
{
    c->calls++;
    c->bytes += (long long)bytes;
    c->host->metric_add(c->host->ctx, "example_comm_calls", 1);
    c->host->metric_add(c->host->ctx, "example_comm_bytes", (double)bytes);
}

static int rank(void *inst)
{
    comm *c = inst;
    return c->inner ? c->io->rank(c->ii) : 0;
}

static int size(void *inst)
{
    comm *c = inst;
    return c->inner ? c->io->size(c->ii) : 1;
}

static int allreduce_sum(void *inst, sy_tensor *t, sy_err *err)
{
    comm *c = inst;
    count(c, sy_tensor_nbytes(t));
    /* A sum over a group of one is the data itself. */
    return c->inner ? c->io->allreduce_sum(c->ii, t, err) : SY_OK;
}

static int allgather(void *inst, const sy_tensor *in, sy_tensor *out, sy_err *err)
{
    comm *c = inst;
    count(c, sy_tensor_nbytes(in));
    if (c->inner)
        return c->io->allgather ? c->io->allgather(c->ii, in, out, err)
                                : sy_err_set(err, SY_ERR_UNSUPPORTED, "example-comm: %s has no allgather",
                                             c->inner->name);
    if (sy_tensor_nbytes(out) != sy_tensor_nbytes(in))
        return sy_err_set(err, SY_ERR_INVALID, "example-comm: allgather over one rank: out holds %zu bytes, in %zu",
                          sy_tensor_nbytes(out), sy_tensor_nbytes(in));
    memmove(out->data, in->data, sy_tensor_nbytes(in));
    return SY_OK;
}

static int broadcast(void *inst, void *buf, size_t bytes, int root, sy_err *err)
{
    comm *c = inst;
    count(c, bytes);
    if (c->inner)
        return c->io->broadcast ? c->io->broadcast(c->ii, buf, bytes, root, err)
                                : sy_err_set(err, SY_ERR_UNSUPPORTED, "example-comm: %s has no broadcast",
                                             c->inner->name);
    return root == 0 ? SY_OK : sy_err_set(err, SY_ERR_INVALID, "example-comm: broadcast root %d of a group of one", root);
}

static int barrier(void *inst, sy_err *err)
{
    comm *c = inst;
    count(c, 0);
    if (c->inner && c->io->barrier)
        return c->io->barrier(c->ii, err);
    return SY_OK;
}

static int setup(void *inst, int r, int world, const char *rendezvous, double timeout_s, sy_err *err)
{
    comm *c = inst;
    if (c->inner) {
        /* setup was appended to the table: an older inner plugin may lack it. */
        if (c->io->struct_size >= offsetof(sy_comm_ops, setup) + sizeof c->io->setup && c->io->setup)
            return c->io->setup(c->ii, r, world, rendezvous, timeout_s, err);
        return SY_OK;
    }
    if ((r > 0) || world > 1)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "example-comm without `inner` is a group of one, asked for rank %d "
                          "of %d", r, world);
    return SY_OK;
}

static const sy_comm_ops ops = {sizeof(sy_comm_ops), rank, size, allreduce_sum, allgather, broadcast, barrier, setup};

static const sy_plugin_desc desc = {
    .struct_size = sizeof(sy_plugin_desc),
    .abi_major = SY_ABI_MAJOR,
    .abi_minor = SY_ABI_MINOR,
    .kind = SY_KIND_COMM,
    .name = "example-comm",
    .version = "1.0.0",
    .device = NULL,
    .description = "example: counts collectives and bytes; a group of one, or forwards to `inner`",
    .keys = keys,
    .probe = probe,
    .create = create,
    .destroy = destroy,
    .ops = &ops,
    .get_proc = NULL,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
