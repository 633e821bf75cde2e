/*
 * Finding, loading and validating plugins, picking one for a config
 * section (by name, by path, or `auto` by probe score), and creating
 * instances.
 *
 * Shared objects that pass validation stay mapped until the process exits
 * (sy_plugin_close frees only our record): unloading code whose threads,
 * TLS destructors or CUDA runtime may still run is a crash waiting to
 * happen, and descriptors handed out in listings must stay valid. A file
 * that is refused is unloaded at once.
 */
#include "config.h"

#include "plugin/config_internal.h"
#include "plugin/loader.h"
#include "plugin/loader_config.h"
#include "util/log.h"
#include "util/util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef SY_PLUGIN_INSTALL_DIR
#error "SY_PLUGIN_INSTALL_DIR (the installed plugins directory) must be defined by the build"
#endif

#define SY__END(type, member) (offsetof(type, member) + sizeof(((type *)0)->member))

/*
 * Struct sizes as of ABI 1.0. Frozen: a later minor appends fields, which
 * grows sizeof() but must not refuse plugins built against 1.0.
 */
#define DESC_HEAD_SIZE SY__END(sy_plugin_desc, abi_minor)
#define DESC_V1_0_SIZE SY__END(sy_plugin_desc, get_proc)

typedef struct op_req {
    const char *name;
    size_t off;
} op_req;

#define OP(type, m) {#m, offsetof(type, m)}
static const op_req device_req[] = {
    OP(sy_device_ops, alloc),       OP(sy_device_ops, free),           OP(sy_device_ops, upload),
    OP(sy_device_ops, download),    OP(sy_device_ops, prepare_weight), OP(sy_device_ops, embed),
    OP(sy_device_ops, rmsnorm),     OP(sy_device_ops, add_rmsnorm),    OP(sy_device_ops, linear),
    OP(sy_device_ops, rope),        OP(sy_device_ops, silu_mul),       OP(sy_device_ops, add),
};
static const op_req attn_req[] = {OP(sy_attn_ops, supports), OP(sy_attn_ops, prepare), OP(sy_attn_ops, forward)};
static const op_req moe_req[] = {OP(sy_moe_ops, supports), OP(sy_moe_ops, prepare), OP(sy_moe_ops, prepare_layer),
                                 OP(sy_moe_ops, forward)};
static const op_req comm_req[] = {OP(sy_comm_ops, rank), OP(sy_comm_ops, size), OP(sy_comm_ops, allreduce_sum)};
static const op_req frontend_req[] = {OP(sy_frontend_ops, start), OP(sy_frontend_ops, stop)};
#undef OP

typedef struct kind_info {
    const op_req *req;
    size_t n_req;
    size_t ops_v1_0_size; /* frozen, see above */
    const char *ops_name;
} kind_info;

#define N(a) (sizeof a / sizeof a[0])
static const kind_info kinds[] = {
    {NULL, 0, 0, NULL},
    {device_req, N(device_req), SY__END(sy_device_ops, synchronize), "sy_device_ops"},
    {attn_req, N(attn_req), SY__END(sy_attn_ops, copy_blocks), "sy_attn_ops"},
    {moe_req, N(moe_req), SY__END(sy_moe_ops, forward), "sy_moe_ops"},
    {comm_req, N(comm_req), SY__END(sy_comm_ops, barrier), "sy_comm_ops"},
    {frontend_req, N(frontend_req), SY__END(sy_frontend_ops, stop), "sy_frontend_ops"},
};

static int kind_valid(int k)
{
    return k >= SY_KIND_DEVICE && k <= SY_KIND_FRONTEND;
}

static const char *article(int kind)
{
    return kind == SY_KIND_ATTN ? "an" : "a";
}

/* ------------------------------------------------------ message building */

typedef struct msgbuf {
    char *b;
    size_t cap, len;
    int full;
} msgbuf;

static void add(msgbuf *m, const char *fmt, ...) SY__PRINTF(2, 3);
static void add(msgbuf *m, const char *fmt, ...)
{
    if (m->full)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(m->b + m->len, m->cap - m->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= m->cap - m->len) {
        m->full = 1;
        m->len = m->cap - 1;
        memcpy(m->b + m->cap - 4, "...", 4);
        return;
    }
    m->len += (size_t)n;
}

/* snprintf that may truncate by design (messages into fixed buffers). */
static void fmt(char *buf, size_t cap, const char *f, ...) SY__PRINTF(3, 4);
static void fmt(char *buf, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
}

/* ---------------------------------------------------------- one plugin */

static int refuse(sy_err *err, void *dl, const char *fmt, ...) SY__PRINTF(3, 4);
static int refuse(sy_err *err, void *dl, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    if (dl)
        dlclose(dl);
    return SY_ERR_UNSUPPORTED;
}

static int name_ok(const char *n)
{
    if (!n || !*n || strcmp(n, "auto") == 0)
        return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '_' || *p == '.' || *p == '+'))
            return 0;
    return 1;
}

static int check_desc(const char *path, const sy_plugin_desc *d, sy_err *err)
{
    if (d->struct_size < DESC_HEAD_SIZE)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: descriptor struct_size %u is too small to hold its ABI version (not built against "
                          "switchyard/plugin.h?)",
                          path, (unsigned)d->struct_size);
    if (d->abi_major != SY_ABI_MAJOR)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: plugin ABI %u.%u (its descriptor, behind %s), this switchyard speaks %d.%d", path,
                          (unsigned)d->abi_major, (unsigned)d->abi_minor, SY_PLUGIN_ENTRY_NAME, SY_ABI_MAJOR,
                          SY_ABI_MINOR);
    if (d->abi_minor > SY_ABI_MINOR)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: plugin ABI %u.%u is newer than this switchyard's %d.%d: upgrade switchyard, or "
                          "rebuild the plugin against plugin.h %d.%d",
                          path, (unsigned)d->abi_major, (unsigned)d->abi_minor, SY_ABI_MAJOR, SY_ABI_MINOR,
                          SY_ABI_MAJOR, SY_ABI_MINOR);
    if (d->struct_size < DESC_V1_0_SIZE)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: descriptor struct_size %u is smaller than ABI %d.0's sy_plugin_desc (%zu bytes)", path,
                          (unsigned)d->struct_size, SY_ABI_MAJOR, (size_t)DESC_V1_0_SIZE);
    if (!kind_valid(d->kind))
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: unknown plugin kind %d (expected 1 device, 2 attn, 3 moe, 4 comm or 5 frontend)", path,
                          (int)d->kind);
    if (!name_ok(d->name))
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: plugin name \"%s\" is not usable (expected letters, digits, '-', '_', '.' or '+', "
                          "and not \"auto\")",
                          path, d->name ? d->name : "(null)");
    if (d->device && !name_ok(d->device))
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: device name \"%s\" is not usable", path, d->device);
    const char *kn = sy_kind_name(d->kind);
    if (!d->probe || !d->create || !d->destroy)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: %s plugin %s has no %s function", path, kn, d->name,
                          !d->probe ? "probe" : !d->create ? "create" : "destroy");
    const kind_info *ki = &kinds[d->kind];
    if (!d->ops)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: %s plugin %s has no ops table (%s)", path, kn, d->name,
                          ki->ops_name);
    uint32_t ops_size;
    memcpy(&ops_size, d->ops, sizeof ops_size);
    if (ops_size < ki->ops_v1_0_size)
        return sy_err_set(err, SY_ERR_UNSUPPORTED,
                          "%s: %s plugin %s: %s struct_size %u is smaller than ABI %d.0's (%zu bytes)", path, kn,
                          d->name, ki->ops_name, (unsigned)ops_size, SY_ABI_MAJOR, ki->ops_v1_0_size);
    for (size_t i = 0; i < ki->n_req; i++) {
        void (*fp)(void);
        memcpy(&fp, (const char *)d->ops + ki->req[i].off, sizeof fp);
        if (!fp)
            return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: %s plugin %s lacks the required op %s.%s", path, kn,
                              d->name, ki->ops_name, ki->req[i].name);
    }
    static const char *const reserved[] = {"plugin", NULL};
    sy_err why;
    if (sy__decls_validate(d->keys, 256, reserved, &why))
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "%s: %s plugin %s: %s", path, kn, d->name, why.msg);
    return SY_OK;
}

int sy_plugin_open(const char *path, sy_plugin **out, sy_err *err)
{
    if (!out)
        return sy_err_set(err, SY_ERR_INVALID, "sy_plugin_open: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return sy_err_set(err, SY_ERR_INVALID, "no plugin file given");
    char file[4096];
    /* A bare name would send dlopen through the library search path. */
    int n = snprintf(file, sizeof file, "%s%s", strchr(path, '/') ? "" : "./", path);
    if (n < 0 || (size_t)n >= sizeof file)
        return sy_err_set(err, SY_ERR_INVALID, "%.200s...: path too long", path);
    dlerror();
    void *dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        why = why ? why : "unknown dlopen error";
        size_t fl = strlen(file);
        if (strncmp(why, file, fl) == 0 && why[fl] == ':' && why[fl + 1] == ' ')
            why += fl + 2; /* dlerror repeats the path */
        return sy_err_set(err, SY_ERR_IO, "%s: cannot load: %s", path, why);
    }
    void *sym = dlsym(dl, SY_PLUGIN_ENTRY_NAME);
    if (!sym) {
        for (int m = 0; m <= 9; m++) {
            char other[32];
            snprintf(other, sizeof other, "sy_plugin_v%d", m);
            if (m != SY_ABI_MAJOR && dlsym(dl, other))
                return refuse(err, dl, "%s: plugin ABI %d.x (it exports %s), this switchyard speaks %d.%d", path, m,
                              other, SY_ABI_MAJOR, SY_ABI_MINOR);
        }
        return refuse(err, dl, "%s: not a switchyard plugin: no symbol %s", path, SY_PLUGIN_ENTRY_NAME);
    }
    sy_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const sy_plugin_desc *d = entry();
    if (!d)
        return refuse(err, dl, "%s: %s() returned no descriptor", path, SY_PLUGIN_ENTRY_NAME);
    sy_err why;
    if (check_desc(path, d, &why))
        return refuse(err, dl, "%s", why.msg);
    sy_plugin *p = calloc(1, sizeof *p);
    if (!p)
        return refuse(err, dl, "%s: out of memory", path);
    snprintf(p->path, sizeof p->path, "%s", path);
    p->dl = dl;
    p->desc = d;
    *out = p;
    return SY_OK;
}

void sy_plugin_close(sy_plugin *p)
{
    /* The shared object stays mapped: see the top of this file. */
    free(p);
}

static sy_plugin *plugin_copy(const sy_plugin *p)
{
    sy_plugin *c = malloc(sizeof *c);
    if (c)
        memcpy(c, p, sizeof *c);
    return c;
}

/* Probe score (> 0 can run); 0 with why when it cannot. host NULL: no probe, score 1. */
static int run_probe(const sy_plugin *p, const sy_host *host, char *why, size_t cap)
{
    why[0] = '\0';
    if (!host)
        return 1;
    sy_err e;
    memset(&e, 0, sizeof e);
    int s = p->desc->probe(host, &e);
    e.msg[sizeof e.msg - 1] = '\0';
    if (s > 0)
        return s;
    if (s < 0)
        fmt(why, cap, "probe returned %d (%s)%s%s", s, sy_status_str(s), e.msg[0] ? ": " : "", e.msg);
    else
        fmt(why, cap, "%s", e.msg[0] ? e.msg : "its probe gave no reason");
    return 0;
}

/* ---------------------------------------------------------- the loader */

typedef struct found {
    char *path;
    char *real; /* for skipping a file reached twice */
    sy_plugin *p; /* NULL when refused */
    char error[sizeof(((sy_err *)0)->msg)];
} found;

struct sy_loader {
    char **dirs;
    size_t n_dirs, cap_dirs;
    char *install;
    int scanned;
    found *f;
    size_t n_f, cap_f;
};

static void drop_scan(sy_loader *ld)
{
    for (size_t i = 0; i < ld->n_f; i++) {
        free(ld->f[i].path);
        free(ld->f[i].real);
        sy_plugin_close(ld->f[i].p);
    }
    free(ld->f);
    ld->f = NULL;
    ld->n_f = ld->cap_f = 0;
    ld->scanned = 0;
}

static int push_dir(sy_loader *ld, const char *d, size_t len)
{
    if (ld->n_dirs == ld->cap_dirs) {
        size_t cap = ld->cap_dirs ? ld->cap_dirs * 2 : 4;
        char **nd = realloc(ld->dirs, cap * sizeof *nd);
        if (!nd)
            return -1;
        ld->dirs = nd;
        ld->cap_dirs = cap;
    }
    char *s = malloc(len + 1);
    if (!s)
        return -1;
    memcpy(s, d, len);
    s[len] = '\0';
    ld->dirs[ld->n_dirs++] = s;
    return 0;
}

sy_loader *sy_loader_new(const char *dirs, const char *install_dir)
{
    sy_loader *ld = calloc(1, sizeof *ld);
    if (!ld)
        return NULL;
    ld->install = sy_strdup(install_dir ? install_dir : SY_PLUGIN_INSTALL_DIR);
    if (!ld->install) {
        sy_loader_free(ld);
        return NULL;
    }
    for (const char *p = dirs; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (len && push_dir(ld, p, len)) {
            sy_loader_free(ld);
            return NULL;
        }
        p = colon ? colon + 1 : p + len;
    }
    return ld;
}

int sy_loader_add_dir(sy_loader *ld, const char *dir, sy_err *err)
{
    if (!ld || !dir)
        return sy_err_set(err, SY_ERR_INVALID, "sy_loader_add_dir: no loader or no dir");
    /* Takes a colon-separated list too, as [plugins] path holds one. */
    for (const char *p = dir; *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (len) {
            char d[4096];
            if (len >= sizeof d)
                return sy_err_set(err, SY_ERR_INVALID, "plugin directory \"%.100s...\": path too long", p);
            memcpy(d, p, len);
            d[len] = '\0';
            struct stat st;
            if (stat(d, &st) != 0)
                return sy_err_set(err, SY_ERR_IO, "plugin directory \"%s\": %s", d, strerror(errno));
            if (!S_ISDIR(st.st_mode))
                return sy_err_set(err, SY_ERR_INVALID, "plugin directory \"%s\": not a directory", d);
            if (push_dir(ld, d, len))
                return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
        }
        p = colon ? colon + 1 : p + len;
    }
    drop_scan(ld);
    return SY_OK;
}

size_t sy__loader_dirs(const sy_loader *ld, const char *const **dirs, const char **install_dir)
{
    if (dirs)
        *dirs = ld ? (const char *const *)ld->dirs : NULL;
    if (install_dir)
        *install_dir = ld ? ld->install : NULL;
    return ld ? ld->n_dirs : 0;
}

void sy_loader_free(sy_loader *ld)
{
    if (!ld)
        return;
    drop_scan(ld);
    for (size_t i = 0; i < ld->n_dirs; i++)
        free(ld->dirs[i]);
    free(ld->dirs);
    free(ld->install);
    free(ld);
}

static found *push_found(sy_loader *ld, const char *path)
{
    if (ld->n_f == ld->cap_f) {
        size_t cap = ld->cap_f ? ld->cap_f * 2 : 16;
        found *nf = realloc(ld->f, cap * sizeof *nf);
        if (!nf)
            return NULL;
        ld->f = nf;
        ld->cap_f = cap;
    }
    found *f = &ld->f[ld->n_f];
    memset(f, 0, sizeof *f);
    if (!(f->path = sy_strdup(path)))
        return NULL;
    ld->n_f++;
    return f;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with_so(const char *n)
{
    size_t l = strlen(n);
    return n[0] != '.' && l > 3 && strcmp(n + l - 3, ".so") == 0;
}

/* Opens every *.so of one dir, in name order. */
static int scan_dir(sy_loader *ld, const char *dir, int configured)
{
    DIR *dh = opendir(dir);
    if (!dh) {
        if (!configured && errno == ENOENT)
            return 0; /* nothing installed */
        int e = errno;
        found *f = push_found(ld, dir);
        if (!f)
            return -1;
        snprintf(f->error, sizeof f->error, "%s: cannot read plugin directory: %s", dir, strerror(e));
        return 0;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (struct dirent *de; (de = readdir(dh));) {
        if (!ends_with_so(de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = -1;
                break;
            }
            names = nn;
        }
        if (!(names[n] = sy_strdup(de->d_name))) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(dh);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[4096];
        if (sy_path_join(path, sizeof path, dir, names[i]))
            continue;
        struct stat st;
        int bad = stat(path, &st) != 0 ? errno : 0;
        if (bad || !S_ISREG(st.st_mode)) {
            found *f = push_found(ld, path);
            if (!f) {
                rc = -1;
                break;
            }
            fmt(f->error, sizeof f->error, "%s: %s", path,
                     bad == ENOENT ? "broken symbolic link" : bad ? strerror(bad) : "not a regular file");
            continue;
        }
        char *real = realpath(path, NULL);
        int dup = 0;
        for (size_t j = 0; real && j < ld->n_f; j++)
            dup |= ld->f[j].real && strcmp(ld->f[j].real, real) == 0;
        if (dup) {
            free(real);
            continue;
        }
        found *f = push_found(ld, path);
        if (!f) {
            free(real);
            rc = -1;
            break;
        }
        f->real = real;
        sy_err e;
        if (sy_plugin_open(path, &f->p, &e)) {
            snprintf(f->error, sizeof f->error, "%s", e.msg);
            sy_debug("plugin scan: %s", e.msg);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

static int scan(sy_loader *ld, sy_err *err)
{
    if (ld->scanned)
        return SY_OK;
    for (size_t i = 0; i <= ld->n_dirs; i++) {
        int configured = i < ld->n_dirs;
        if (scan_dir(ld, configured ? ld->dirs[i] : ld->install, configured)) {
            drop_scan(ld);
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory while scanning plugin directories");
        }
    }
    ld->scanned = 1;
    return SY_OK;
}

static void add_dirs(msgbuf *m, const sy_loader *ld)
{
    for (size_t i = 0; i < ld->n_dirs; i++)
        add(m, "%s%s", i ? ", " : "", ld->dirs[i]);
    add(m, "%s%s", ld->n_dirs ? ", " : "", ld->install);
}

static size_t n_refused(const sy_loader *ld)
{
    size_t n = 0;
    for (size_t i = 0; i < ld->n_f; i++)
        n += ld->f[i].p == NULL;
    return n;
}

/* Earlier dirs win: is f's kind/name already provided by an earlier file? */
static int shadowed(const sy_loader *ld, size_t idx)
{
    const sy_plugin_desc *d = ld->f[idx].p->desc;
    for (size_t j = 0; j < idx; j++) {
        const sy_plugin *q = ld->f[j].p;
        if (q && q->desc->kind == d->kind && strcmp(q->desc->name, d->name) == 0)
            return 1;
    }
    return 0;
}

static int device_ok(const sy_plugin_desc *d, const char *device)
{
    return !device || !d->device || strcmp(d->device, device) == 0;
}

/* Kind and device of a plugin the config chose; errors name the file. */
static int check_match(const sy_plugin *p, sy_plugin_kind kind, const char *device, sy_err *err)
{
    const sy_plugin_desc *d = p->desc;
    if (d->kind != (int32_t)kind)
        return sy_err_set(err, SY_ERR_INVALID, "%s is %s %s plugin, %s needs %s %s plugin", p->path,
                          article(d->kind), sy_kind_name(d->kind), sy_kind_section(kind), article(kind),
                          sy_kind_name(kind));
    if (!device_ok(d, device))
        return sy_err_set(err, SY_ERR_INVALID, "%s runs on device %s, but [device] is %s", p->path, d->device,
                          device);
    return SY_OK;
}

static int pinned(const sy_plugin *p, const sy_host *host, sy_plugin **out, sy_err *err)
{
    char why[sizeof(((sy_err *)0)->msg)];
    if (run_probe(p, host, why, sizeof why) <= 0)
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "%s: %s plugin %s cannot run here: %s", p->path,
                          sy_kind_name(p->desc->kind), p->desc->name, why);
    if (!(*out = plugin_copy(p)))
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    return SY_OK;
}

/* auto found nothing that can run: every plugin of the kind and why, or where it looked. */
static int none_can_run(sy_loader *ld, sy_plugin_kind kind, const char *device, const sy_host *host, int n_cand,
                        sy_err *err)
{
    const char *kn = sy_kind_name(kind);
    char why[sizeof(((sy_err *)0)->msg)];
    if (!err)
        return SY_ERR_UNAVAILABLE;
    msgbuf m = {err->msg, sizeof err->msg, 0, 0};
    size_t refused = n_refused(ld);
    char tail[160];
    snprintf(tail, sizeof tail, "%s%zu file%s refused: `switchyard plugins` lists why", refused ? "; " : "",
             refused, refused == 1 ? "" : "s");
    if (!refused)
        tail[0] = '\0';
    /* Keep room for the tail so truncation eats candidates, not the hint. */
    m.cap -= strlen(tail);
    int listed = 0;
    for (size_t i = 0; i < ld->n_f; i++) {
        const sy_plugin *p = ld->f[i].p;
        if (!p || p->desc->kind != (int32_t)kind || shadowed(ld, i))
            continue;
        if (!listed++)
            add(&m, "auto: no %s plugin can run%s%s; candidates: ", kn, device ? " on device " : "",
                device ? device : "");
        else
            add(&m, "; ");
        if (!device_ok(p->desc, device))
            add(&m, "%s (%s) runs on device %s", p->path, p->desc->name, p->desc->device);
        else {
            run_probe(p, host, why, sizeof why);
            add(&m, "%s (%s) cannot run: %s", p->path, p->desc->name, why);
        }
    }
    if (!listed) {
        add(&m, "auto: no %s plugin found in ", kn);
        add_dirs(&m, ld);
    }
    m.cap += strlen(tail);
    m.full = 0;
    add(&m, "%s", tail);
    return n_cand || listed ? SY_ERR_UNAVAILABLE : SY_ERR_UNSUPPORTED;
}

void sy_loader_candidates_free(sy_plugin_candidate *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++)
        sy_plugin_close(c[i].plugin);
    free(c);
}

/* sy_loader_candidates once the dirs are scanned. */
static int collect_candidates(sy_loader *ld, sy_plugin_kind kind, const char *device, const sy_host *host,
                              sy_plugin_candidate **out, size_t *n, sy_err *err)
{
    sy_plugin_candidate *c = calloc(ld->n_f ? ld->n_f : 1, sizeof *c);
    if (!c)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    const char *kn = sy_kind_name(kind);
    char why[sizeof(((sy_err *)0)->msg)];
    size_t k = 0;
    int n_cand = 0;
    for (size_t i = 0; i < ld->n_f; i++) {
        const sy_plugin *p = ld->f[i].p;
        if (!p || p->desc->kind != (int32_t)kind || !device_ok(p->desc, device) || shadowed(ld, i))
            continue;
        n_cand++;
        const int s = run_probe(p, host, why, sizeof why);
        sy_debug("auto %s: %s (%s) scores %d%s%s", kn, p->desc->name, p->path, s, s ? "" : ": ", why);
        if (s <= 0)
            continue;
        sy_plugin *copy = plugin_copy(p);
        if (!copy) {
            sy_loader_candidates_free(c, k);
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
        }
        /* Insertion after every score >= s: equal scores stay in search order (the first found wins a tie). */
        size_t at = k++;
        for (; at > 0 && c[at - 1].score < s; at--)
            c[at] = c[at - 1];
        c[at] = (sy_plugin_candidate){copy, s};
    }
    if (!k) {
        free(c);
        return none_can_run(ld, kind, device, host, n_cand, err);
    }
    *out = c;
    *n = k;
    return SY_OK;
}

static int resolve_auto(sy_loader *ld, sy_plugin_kind kind, const char *device, const sy_host *host,
                        sy_plugin **out, sy_err *err)
{
    sy_plugin_candidate *c = NULL;
    size_t n = 0;
    int rc = collect_candidates(ld, kind, device, host, &c, &n, err);
    if (rc)
        return rc;
    sy_debug("auto %s: picked %s (%s), score %d", sy_kind_name(kind), c[0].plugin->desc->name, c[0].plugin->path,
             c[0].score);
    *out = c[0].plugin;
    c[0].plugin = NULL;
    sy_loader_candidates_free(c, n);
    return SY_OK;
}

static int resolve_name(sy_loader *ld, sy_plugin_kind kind, const char *spec, const char *device,
                        const sy_host *host, sy_plugin **out, sy_err *err)
{
    const sy_plugin *other_dev = NULL, *other_kind = NULL;
    for (size_t i = 0; i < ld->n_f; i++) {
        const sy_plugin *p = ld->f[i].p;
        if (!p || strcmp(p->desc->name, spec) != 0)
            continue;
        if (p->desc->kind != (int32_t)kind) {
            other_kind = other_kind ? other_kind : p;
            continue;
        }
        if (!device_ok(p->desc, device)) {
            other_dev = other_dev ? other_dev : p;
            continue;
        }
        return pinned(p, host, out, err);
    }
    if (other_dev)
        return check_match(other_dev, kind, device, err);
    if (!err)
        return SY_ERR_UNSUPPORTED;
    const char *kn = sy_kind_name(kind);
    msgbuf m = {err->msg, sizeof err->msg, 0, 0};
    add(&m, "no %s plugin named \"%s\" in ", kn, spec);
    add_dirs(&m, ld);
    const char *best = NULL;
    int bestd = 3, listed = 0;
    for (size_t i = 0; i < ld->n_f; i++) {
        const sy_plugin *p = ld->f[i].p;
        if (!p || p->desc->kind != (int32_t)kind || shadowed(ld, i))
            continue;
        int dist = sy__edit_distance(spec, p->desc->name, 2);
        if (dist < bestd) {
            bestd = dist;
            best = p->desc->name;
        }
    }
    if (best)
        add(&m, " (did you mean \"%s\"?)", best);
    for (size_t i = 0; i < ld->n_f; i++) {
        const sy_plugin *p = ld->f[i].p;
        if (!p || p->desc->kind != (int32_t)kind || shadowed(ld, i))
            continue;
        add(&m, "%s%s", listed++ ? ", " : "; found: ", p->desc->name);
    }
    /* Kinds have separate names (device cpu, attn cpu): another kind's is only a hint. */
    if (other_kind)
        add(&m, "; %s is %s %s plugin named \"%s\"", other_kind->path, article(other_kind->desc->kind),
            sy_kind_name(other_kind->desc->kind), spec);
    size_t refused = n_refused(ld);
    if (refused)
        add(&m, "; %zu file%s refused: `switchyard plugins` lists why", refused, refused == 1 ? "" : "s");
    return SY_ERR_UNSUPPORTED;
}

int sy_loader_resolve(sy_loader *ld, sy_plugin_kind kind, const char *spec, const char *device, const sy_host *host,
                      sy_plugin **out, sy_err *err)
{
    if (!out)
        return sy_err_set(err, SY_ERR_INVALID, "sy_loader_resolve: out is NULL");
    *out = NULL;
    if (!ld || !kind_valid(kind))
        return sy_err_set(err, SY_ERR_INVALID, "sy_loader_resolve: no loader, or unknown kind %d", (int)kind);
    if (!spec || !*spec)
        return sy_err_set(err, SY_ERR_INVALID, "%s: no plugin given: expected a plugin name, a path to a .so, or auto",
                          sy_kind_section(kind));
    if (strchr(spec, '/')) {
        sy_plugin *p = NULL;
        int rc = sy_plugin_open(spec, &p, err);
        if (rc)
            return rc;
        if ((rc = check_match(p, kind, device, err)) || (rc = pinned(p, host, out, err))) {
            sy_plugin_close(p);
            return rc;
        }
        sy_plugin_close(p);
        return SY_OK;
    }
    int rc = scan(ld, err);
    if (rc)
        return rc;
    if (strcmp(spec, "auto") == 0)
        return resolve_auto(ld, kind, device, host, out, err);
    return resolve_name(ld, kind, spec, device, host, out, err);
}

int sy_loader_candidates(sy_loader *ld, sy_plugin_kind kind, const char *device, const sy_host *host,
                         sy_plugin_candidate **out, size_t *n, sy_err *err)
{
    if (!out || !n)
        return sy_err_set(err, SY_ERR_INVALID, "sy_loader_candidates: out and n are required");
    *out = NULL;
    *n = 0;
    if (!ld || !kind_valid(kind))
        return sy_err_set(err, SY_ERR_INVALID, "sy_loader_candidates: no loader, or unknown kind %d", (int)kind);
    int rc = scan(ld, err);
    if (rc)
        return rc;
    return collect_candidates(ld, kind, device, host, out, n, err);
}

int sy_loader_list(sy_loader *ld, const sy_host *host, sy_plugin_listing **out, size_t *n, sy_err *err)
{
    if (!ld || !out || !n)
        return sy_err_set(err, SY_ERR_INVALID, "sy_loader_list: loader, out and n are required");
    *out = NULL;
    *n = 0;
    int rc = scan(ld, err);
    if (rc)
        return rc;
    sy_plugin_listing *l = calloc(ld->n_f ? ld->n_f : 1, sizeof *l);
    if (!l)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ld->n_f; i++) {
        const found *f = &ld->f[i];
        snprintf(l[i].path, sizeof l[i].path, "%s", f->path);
        if (!f->p) {
            snprintf(l[i].error, sizeof l[i].error, "%s", f->error);
            continue;
        }
        l[i].desc = f->p->desc;
        l[i].score = run_probe(f->p, host, l[i].why, sizeof l[i].why);
    }
    *out = l;
    *n = ld->n_f;
    return SY_OK;
}

void sy_loader_list_free(sy_loader *ld, sy_plugin_listing *l, size_t n)
{
    (void)ld;
    (void)n;
    free(l);
}

/* ----------------------------------------------------------- instances */

int sy_plugin_create(sy_plugin *p, const sy_host *host, const sy_config *cfg, const char *section,
                     sy_plugin_inst **out, sy_err *err)
{
    /* p is ours from here on: closed on every failure, or by the instance. */
    if (out)
        *out = NULL;
    if (!out || !p || !p->desc || !host || !section) {
        sy_plugin_close(p);
        return sy_err_set(err, SY_ERR_INVALID, "sy_plugin_create: out, plugin, host and section are required");
    }
    const sy_plugin_desc *d = p->desc;
    static const char *const reserved[] = {"plugin", NULL};
    char owner[4200];
    snprintf(owner, sizeof owner, "plugin %s (%s)", d->name, p->path);
    sy_kv *kv = NULL;
    size_t nkv = 0;
    int rc = sy__config_bind(cfg, section, d->keys, reserved, owner, &kv, &nkv, err);
    if (rc) {
        sy_plugin_close(p);
        return rc;
    }
    /*
     * The instance keeps its own copy of the keys (one block), so values
     * stay valid for its whole life whatever happens to the config.
     */
    size_t bytes = (nkv ? nkv : 1) * sizeof(sy_kv);
    for (size_t i = 0; i < nkv; i++)
        bytes += strlen(kv[i].key) + strlen(kv[i].value) + 2;
    sy_kv *copy = malloc(bytes);
    sy_plugin_inst *pi = calloc(1, sizeof *pi);
    if (!copy || !pi) {
        free(kv);
        free(copy);
        free(pi);
        sy_plugin_close(p);
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    }
    char *s = (char *)(copy + (nkv ? nkv : 1));
    for (size_t i = 0; i < nkv; i++) {
        size_t kl = strlen(kv[i].key) + 1, vl = strlen(kv[i].value) + 1;
        memcpy(s, kv[i].key, kl);
        copy[i].key = s;
        s += kl;
        memcpy(s, kv[i].value, vl);
        copy[i].value = s;
        s += vl;
    }
    free(kv);
    sy_err perr;
    memset(&perr, 0, sizeof perr);
    void *inst = NULL;
    rc = d->create(host, copy, nkv, &inst, &perr);
    if (rc != SY_OK) {
        perr.msg[sizeof perr.msg - 1] = '\0';
        free(copy);
        free(pi);
        if (rc > 0 || rc < SY_ERR_IO)
            rc = SY_ERR_INTERNAL;
        sy_err_set(err, rc, "%s: create failed: %s", p->path, perr.msg[0] ? perr.msg : sy_status_str(rc));
        sy_plugin_close(p);
        return rc;
    }
    pi->plugin = p;
    pi->inst = inst;
    pi->ops = d->ops;
    pi->cfg = copy;
    pi->n_cfg = nkv;
    *out = pi;
    return SY_OK;
}

void sy_plugin_inst_destroy(sy_plugin_inst *pi)
{
    if (!pi)
        return;
    if (pi->inst && pi->plugin && pi->plugin->desc->destroy)
        pi->plugin->desc->destroy(pi->inst);
    sy_plugin_close(pi->plugin);
    free(pi->cfg);
    free(pi);
}
