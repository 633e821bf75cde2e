/*
 * `switchyard bench-comm`: allreduce latency and bandwidth by message size
 * for the comm plugins, in the table format of nccl-tests (size, count,
 * type, redop, time, algbw, busbw, #wrong), plus the algorithm each size
 * took.
 *
 * For shm, tcp (on 127.0.0.1) and local it starts the ranks itself: it
 * forks --ranks children, each loads the plugin through the loader and
 * joins the group with setup(rank, N, a rendezvous name unique to this
 * run, --timeout). With
 * --launched the ranks come from a launcher instead (mpirun: the
 * OMPI_COMM_WORLD_RANK/SIZE environment), which is how mpi runs.
 *
 * Each rank runs as the engine's would: the host table carries its local
 * rank (the fork index; with --launched the launcher's local rank), and
 * when the comm plugin works on another device than "cpu" (nccl and
 * cuda-p2p on "cuda") the rank opens that device's plugin first, through
 * the loader with the configuration's [device] section, so that rank r
 * computes on GPU r ([device] gpu = -1) instead of every rank on GPU 0. The
 * table header says which GPU each rank took.
 *
 * busbw = algbw * 2(n-1)/n, as nccl-tests reports for allreduce. #wrong
 * counts elements that differ from the exact sum (the inputs are small
 * integers, so every summation order gives the same exact result).
 */
#include "config.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "plugin/config.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "plugin/loader_config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct bench_opts {
    sy_cli_common common;
    const char *plugin; /* local|shm|mpi|all|a path */
    int ranks;
    unsigned long long min_bytes, max_bytes;
    int factor;
    int iters;  /* 0: by size */
    int warmup;
    double timeout_s;
    int launched;
    const char *rendezvous;
} bench_opts;

typedef const char *(*algorithm_fn)(void *inst, size_t bytes);

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard bench-comm [--plugin local|shm|tcp|nccl|cuda-p2p|mpi|all|PATH] [--ranks N]\n"
            "                             [--min-bytes SIZE]\n"
            "                             [--max-bytes SIZE] [--factor F] [--iters N] [--warmup N] [--timeout S]\n"
            "                             [--launched] [--rendezvous NAME] [-c CONFIG] [--set comm.KEY=VALUE]...\n"
            "                             [--plugin-dir DIR]...\n"
            "Allreduce (float, sum, in place) latency and bandwidth by size, as nccl-tests prints them.\n"
            "  --plugin      the comm plugin (default all: every comm plugin that can run here)\n"
            "  --ranks N     ranks to fork (default 2; local is always 1). For a GPU comm plugin (nccl,\n"
            "                cuda-p2p) each rank opens the device plugin first ([device] keys, e.g.\n"
            "                --set device.gpu=N pins one GPU): rank r computes on GPU r by default\n"
            "  --min-bytes / --max-bytes  sizes, multiplied by --factor (default 8 .. 64M, factor 2)\n"
            "  --iters N     timed iterations per size (default: by size, 5..1000); --warmup N (default 5)\n"
            "  --timeout S   bound on the rendezvous and every collective (default 30)\n"
            "  --launched    ranks come from the launcher (mpirun), not forked here:\n"
            "                mpirun -n 2 switchyard bench-comm --plugin mpi --launched\n"
            "  --set comm.KEY=VALUE  plugin keys, e.g. comm.algorithm=twoshot comm.crossover=256K (device.KEY too)\n"
            "Exit status: 0; 1 when a rank fails or a result is wrong; 2 on bad usage.\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_args(int argc, char **argv, bench_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v;
        long long n;
        int rc = sy_cli_common_arg(&o->common, argc, argv, &i);
        if (rc < 0)
            return -1;
        if (rc > 0)
            continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--launched")) {
            o->launched = 1;
        } else if (!strcmp(a, "--plugin") || !strcmp(a, "--rendezvous")) {
            if (!(v = sy_cli_value(argc, argv, &i)))
                return -1;
            *(a[2] == 'p' ? &o->plugin : &o->rendezvous) = v;
        } else if (!strcmp(a, "--min-bytes") || !strcmp(a, "--max-bytes")) {
            if (!(v = sy_cli_value(argc, argv, &i)))
                return -1;
            unsigned long long *dst = a[3] == 'i' ? &o->min_bytes : &o->max_bytes;
            if (sy_parse_size(v, dst) != 0 || *dst < 4 || *dst > (1ull << 40)) {
                fprintf(stderr, "switchyard bench-comm: option %s expects a size from 4 to 1T (e.g. 8, 64K, 1M), "
                        "found \"%s\"\n", a, v);
                return -1;
            }
        } else if (!strcmp(a, "--ranks") || !strcmp(a, "--factor") || !strcmp(a, "--iters") ||
                   !strcmp(a, "--warmup")) {
            if (!(v = sy_cli_value(argc, argv, &i)))
                return -1;
            const int lo = !strcmp(a, "--warmup") ? 0 : !strcmp(a, "--factor") ? 2 : 1;
            if (sy_cli_int(a, v, lo, 1000000, &n))
                return -1;
            *(!strcmp(a, "--ranks") ? &o->ranks : !strcmp(a, "--factor") ? &o->factor
                                                : !strcmp(a, "--iters") ? &o->iters : &o->warmup) = (int)n;
        } else if (!strcmp(a, "--timeout")) {
            if (!(v = sy_cli_value(argc, argv, &i)) || sy_cli_float(a, v, 0.001, 1e6, &o->timeout_s))
                return -1;
        } else {
            fprintf(stderr, "switchyard bench-comm: unknown option \"%s\"\n", a);
            usage(stderr);
            return -1;
        }
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "switchyard bench-comm: --min-bytes %llu is above --max-bytes %llu\n", o->min_bytes,
                o->max_bytes);
        return -1;
    }
    return 0;
}

/* -c CONFIG when given, else an empty configuration; --set applies either way. */
static int load_config(bench_opts *o, sy_config **cfg)
{
    if (o->common.config_path)
        return sy_cli_load_config(&o->common, cfg);
    return sy_cli_config_without_file(&o->common, "switchyard bench-comm", cfg);
}

/* The comm instance of one rank (and the device instance under it), with what it needs to be torn down. */
typedef struct rank_ctx {
    sy_host_ctx host;
    sy_config *cfg;
    sy_loader *ld;
    sy_plugin_inst *dev; /* NULL for a comm plugin on host memory (device "cpu") */
    int gpu;             /* dev's device index (its get_proc("gpu")), -1 when it has none */
    sy_plugin_inst *pi;
    const sy_comm_ops *ops;
    algorithm_fn algorithm;
} rank_ctx;

static void rank_close(rank_ctx *r)
{
    if (r->pi)
        sy_plugin_inst_destroy(r->pi);
    if (r->dev) /* after the comm instance, which may use its device */
        sy_plugin_inst_destroy(r->dev);
    if (r->ld)
        sy_loader_free(r->ld);
    if (r->cfg)
        sy_config_free(r->cfg);
    sy_host_fini(&r->host);
}

/*
 * The device plugin for a comm plugin that works on device memory of
 * `device`: [device] plugin when it names one, else auto among that
 * device's plugins, created with the [device] keys, as the engine opens it
 * before joining the group.
 */
static int open_device(rank_ctx *r, const char *device, int rank, sy_err *err)
{
    const char *spec = sy_config_get(r->cfg, "device", "plugin");
    if (!spec || !*spec)
        spec = "auto";
    sy_plugin *p = NULL;
    const char *section = "device";
    int rc = sy_loader_resolve(r->ld, SY_KIND_DEVICE, spec, device, &r->host.api, &p, err);
    sy_plugin *other = NULL;
    sy_err ignored = {{0}};
    int foreign = 0;
    if (rc && strcmp(spec, "auto") != 0 && !sy_loader_resolve(r->ld, SY_KIND_DEVICE, spec, NULL, &r->host.api, &other,
                                                             &ignored)) {
        sy_plugin_close(other); /* it exists, for another device */
        foreign = 1;
        rc = sy_loader_resolve(r->ld, SY_KIND_DEVICE, "auto", device, &r->host.api, &p, err);
    }
    if (foreign && !rc) {
        /* A CPU serving config ([device] plugin = cpu) benchmarking a GPU transport: its [device] keys are the
         * cpu plugin's, so the device's own plugin opens with its defaults. */
        if (rank == 0)
            fprintf(stderr, "switchyard bench-comm: [device] plugin = %s is not for device %s; the ranks open %s with "
                    "its defaults\n", spec, device, p->desc->name);
        section = "device (not this plugin's)";
    }
    if (!rc)
        rc = sy_plugin_create(p, &r->host.api, r->cfg, section, &r->dev, err);
    if (rc) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return sy_err_set(err, rc, "rank %d (local rank %d): the comm plugin works on device %s, whose device plugin "
                          "([device] plugin = %s) cannot open: %s", rank, r->host.api.local_rank, device, spec, why);
    }
    const sy_plugin_desc *d = r->dev->plugin->desc;
    int (*gpu_of)(void *) = d->get_proc ? (int (*)(void *))d->get_proc("gpu") : NULL;
    r->gpu = gpu_of ? gpu_of(r->dev->inst) : -1;
    return SY_OK;
}

static int rank_open(bench_opts *o, const char *plugin, int rank, int local_rank, int world, const char *rendezvous,
                     rank_ctx *r)
{
    sy_err err = {{0}};
    memset(r, 0, sizeof *r);
    r->gpu = -1;
    sy_host_init(&r->host);
    /* Before any probe: a GPU plugin takes it as its default device, as in the engine. */
    r->host.api.local_rank = local_rank;
    if (load_config(o, &r->cfg))
        return -1;
    if (sy_loader_from_config(r->cfg, o->common.plugin_dirs[0] ? o->common.plugin_dirs : NULL, NULL, &r->ld, &err)) {
        fprintf(stderr, "switchyard bench-comm: %s\n", err.msg);
        return -1;
    }
    sy_plugin *p = NULL;
    if (sy_loader_resolve(r->ld, SY_KIND_COMM, plugin, NULL, &r->host.api, &p, &err)) {
        fprintf(stderr, "switchyard bench-comm: comm plugin %s: %s\n", plugin, err.msg);
        return -1;
    }
    /* [comm] keys belong to the plugin the section names (or to any, when it names none). */
    const char *named = sy_config_get(r->cfg, "comm", "plugin");
    const char *section = !named || !strcmp(named, p->desc->name) ? "comm" : "comm (not this plugin's)";
    const sy_plugin_desc *desc = p->desc;
    if (desc->device && *desc->device && strcmp(desc->device, "cpu") != 0 && open_device(r, desc->device, rank, &err)) {
        sy_plugin_close(p);
        fprintf(stderr, "switchyard bench-comm: comm plugin %s: %s\n", plugin, err.msg);
        return -1;
    }
    if (sy_plugin_create(p, &r->host.api, r->cfg, section, &r->pi, &err)) {
        fprintf(stderr, "switchyard bench-comm: comm plugin %s: %s\n", plugin, err.msg);
        return -1;
    }
    r->ops = r->pi->ops;
    r->algorithm = desc->get_proc ? (algorithm_fn)desc->get_proc("algorithm") : NULL;
    const size_t need = offsetof(sy_comm_ops, setup) + sizeof r->ops->setup;
    if (r->ops->struct_size >= need && r->ops->setup) {
        if (r->ops->setup(r->pi->inst, rank, world, rendezvous, o->timeout_s, &err)) {
            fprintf(stderr, "switchyard bench-comm: rank %d: %s\n", rank, err.msg);
            return -1;
        }
    } else if (world != 1) {
        fprintf(stderr, "switchyard bench-comm: comm plugin %s has no setup op, so it cannot join %d ranks\n",
                desc->name, world);
        return -1;
    }
    return 0;
}

static float expected_value(size_t i, int world)
{
    float s = 0;
    for (int r = 0; r < world; r++)
        s += (float)((int)((i * 7 + (size_t)r * 13) % 17) - 8);
    return s;
}

/* One size: the timed loop, then a checked run. Returns 0, or -1 (printed). */
static int bench_size(bench_opts *o, rank_ctx *r, float *buf, size_t bytes, double *bw_sum, int *n_rows)
{
    sy_err err = {{0}};
    void *inst = r->pi->inst;
    const int rank = r->ops->rank(inst), world = r->ops->size(inst);
    const size_t count = bytes / sizeof(float) ? bytes / sizeof(float) : 1;
    bytes = count * sizeof(float);
    sy_tensor t = sy_tensor_2d(buf, SY_DTYPE_F32, 1, (int64_t)count);
    int iters = o->iters;
    if (!iters) {
        unsigned long long it = (256ull << 20) / bytes;
        iters = it < 5 ? 5 : it > 1000 ? 1000 : (int)it;
    }
    memset(buf, 0, bytes);
    for (int i = 0; i < o->warmup; i++)
        if (r->ops->allreduce_sum(inst, &t, &err))
            goto fail;
    if (r->ops->barrier && r->ops->barrier(inst, &err))
        goto fail;
    const double t0 = now_s();
    for (int i = 0; i < iters; i++)
        if (r->ops->allreduce_sum(inst, &t, &err))
            goto fail;
    const double us = (now_s() - t0) / iters * 1e6;
    for (size_t i = 0; i < count; i++)
        buf[i] = (float)((int)((i * 7 + (size_t)rank * 13) % 17) - 8);
    if (r->ops->allreduce_sum(inst, &t, &err))
        goto fail;
    float wrong = 0;
    for (size_t i = 0; i < count; i++)
        wrong += buf[i] != expected_value(i, world);
    sy_tensor w = sy_tensor_2d(&wrong, SY_DTYPE_F32, 1, 1);
    if (r->ops->allreduce_sum(inst, &w, &err))
        goto fail;
    const double algbw = (double)bytes / (us * 1e-6) / 1e9;
    const double busbw = algbw * 2.0 * (world - 1) / world;
    if (rank == 0) {
        const char *algo = r->algorithm ? r->algorithm(inst, bytes) : "-";
        printf("%12zu  %12zu  %8s  %6s  %9.2f  %8.3f  %8.3f  %6.0f  %s\n", bytes, count, "float", "sum", us, algbw,
               busbw, wrong, algo);
        fflush(stdout);
    }
    *bw_sum += busbw;
    (*n_rows)++;
    return wrong == 0 ? 0 : -1;
fail:
    fprintf(stderr, "switchyard bench-comm: rank %d, %zu bytes: %s\n", rank, bytes, err.msg);
    return -1;
}

/*
 * The header's device line, "# device cuda: rank 0 on GPU 0, rank 1 on GPU 1"
 * (every rank's GPU, summed into a vector that only holds 1 + the own GPU
 * in the rank's place), or "" when the comm plugin works on host memory.
 * A collective: every rank calls it. Returns 0, or -1 (printed).
 */
static int device_line(rank_ctx *r, int rank, int world, char *out, size_t cap)
{
    out[0] = 0;
    if (!r->dev)
        return 0;
    float *g = calloc((size_t)world, sizeof *g);
    sy_err err = {{0}};
    if (!g) {
        fprintf(stderr, "switchyard bench-comm: rank %d: out of memory\n", rank);
        return -1;
    }
    g[rank] = (float)(r->gpu + 1);
    sy_tensor t = sy_tensor_2d(g, SY_DTYPE_F32, 1, world);
    if (r->ops->allreduce_sum(r->pi->inst, &t, &err)) {
        fprintf(stderr, "switchyard bench-comm: rank %d: gathering the ranks' GPUs: %s\n", rank, err.msg);
        free(g);
        return -1;
    }
    size_t len = (size_t)snprintf(out, cap, "# device %s:", r->dev->plugin->desc->name);
    for (int i = 0; i < world && len < cap; i++) {
        const int gpu = (int)g[i] - 1;
        if (gpu >= 0)
            len += (size_t)snprintf(out + len, cap - len, "%s rank %d on GPU %d", i ? "," : "", i, gpu);
        else
            len += (size_t)snprintf(out + len, cap - len, "%s rank %d on its device", i ? "," : "", i);
    }
    free(g);
    return 0;
}

/* One rank's whole run. Returns the exit status. */
static int run_rank(bench_opts *o, const char *plugin, int rank, int local_rank, int world, const char *rendezvous)
{
    rank_ctx r;
    int status = 1;
    char devline[4096];
    if (rank_open(o, plugin, rank, local_rank, world, rendezvous, &r))
        goto out;
    rank = r.ops->rank(r.pi->inst);
    world = r.ops->size(r.pi->inst);
    if (device_line(&r, rank, world, devline, sizeof devline))
        goto out;
    size_t cap = (size_t)o->max_bytes / sizeof(float) * sizeof(float);
    float *buf = aligned_alloc(64, (cap + 63) / 64 * 64);
    if (!buf) {
        fprintf(stderr, "switchyard bench-comm: rank %d: cannot allocate %zu bytes\n", rank, cap);
        goto out;
    }
    if (rank == 0) {
        printf("# switchyard bench-comm: comm plugin %s, %d rank%s, allreduce float sum in place, timeout %.0f s\n",
               r.pi->plugin->desc->name, world, world == 1 ? "" : "s", o->timeout_s);
        if (devline[0])
            printf("%s\n", devline);
        printf("#\n# %10s  %12s  %8s  %6s  %9s  %8s  %8s  %6s  %s\n", "size", "count", "type", "redop", "time",
               "algbw", "busbw", "#wrong", "algorithm");
        printf("# %10s  %12s  %8s  %6s  %9s  %8s  %8s  %6s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
               "(GB/s)", "");
        fflush(stdout);
    }
    double bw_sum = 0;
    int rows = 0, bad = 0;
    for (unsigned long long b = o->min_bytes; b <= o->max_bytes; b *= (unsigned long long)o->factor) {
        int rc = bench_size(o, &r, buf, (size_t)b, &bw_sum, &rows);
        if (rc)
            bad = 1;
        if (rc && rows == 0)
            break; /* a collective failed rather than a wrong result */
    }
    if (rank == 0 && rows) {
        printf("# Out of bounds values : %s\n# Avg bus bandwidth    : %.3f GB/s\n#\n", bad ? "FAILED" : "0 OK",
               bw_sum / rows);
        fflush(stdout);
    }
    free(buf);
    status = bad;
out:
    rank_close(&r);
    return status;
}

/*
 * comm tcp meets at an address: a loopback listener on a port the kernel
 * picks, handed to rank 0 as ";fd=N" as `--nnodes` does (no port to race
 * for). Returns the socket and writes both rendezvous strings, or -1.
 */
static int tcp_meeting_point(char *rdv, size_t cap, char *rdv0, size_t cap0)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 256) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("switchyard bench-comm: comm tcp rendezvous on 127.0.0.1");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    snprintf(rdv, cap, "127.0.0.1:%d/bench-%ld", ntohs(a.sin_port), (long)getpid());
    snprintf(rdv0, cap0, "%s;fd=%d", rdv, fd);
    return fd;
}

/* Forks the ranks of one plugin and waits for them all. */
static int run_forked(bench_opts *o, const char *plugin, int world)
{
    char rendezvous[128], rendezvous0[160];
    snprintf(rendezvous, sizeof rendezvous, "bench-%ld-%ld-%.32s", (long)getpid(), (long)time(NULL), plugin);
    snprintf(rendezvous0, sizeof rendezvous0, "%s", rendezvous);
    int lfd = -1;
    if (!strcmp(plugin, "tcp") && (lfd = tcp_meeting_point(rendezvous, sizeof rendezvous, rendezvous0,
                                                           sizeof rendezvous0)) < 0)
        return 1;
    pid_t pids[256];
    fflush(stdout);
    fflush(stderr);
    for (int rank = 0; rank < world; rank++) {
        pids[rank] = fork();
        if (pids[rank] < 0) {
            perror("switchyard bench-comm: fork");
            world = rank;
            break;
        }
        if (pids[rank] == 0) {
            if (rank != 0 && lfd >= 0)
                close(lfd);
            /* The forked ranks are one node's: each one's local rank is its rank. */
            int st = run_rank(o, plugin, rank, rank, world, rank == 0 ? rendezvous0 : rendezvous);
            fflush(stdout);
            fflush(stderr);
            _exit(st);
        }
    }
    if (lfd >= 0)
        close(lfd);
    int status = 0;
    for (int rank = 0; rank < world; rank++) {
        int ws = 0;
        if (waitpid(pids[rank], &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            if (WIFSIGNALED(ws))
                fprintf(stderr, "switchyard bench-comm: rank %d (pid %d) killed by signal %d\n", rank,
                        (int)pids[rank], WTERMSIG(ws));
            status = 1;
        }
    }
    return status;
}

static int env_int(const char *const *names, int dflt)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v)
            return atoi(v);
    }
    return dflt;
}

/* The comm plugins that can run here, for --plugin all: up to 16 names into names. */
static int available_plugins(bench_opts *o, char names[16][64])
{
    sy_config *cfg = NULL;
    sy_loader *ld = NULL;
    sy_host_ctx host;
    sy_err err = {{0}};
    sy_plugin_listing *l = NULL;
    size_t n = 0;
    int count = 0;
    sy_host_init(&host);
    if (load_config(o, &cfg) == 0 &&
        sy_loader_from_config(cfg, o->common.plugin_dirs[0] ? o->common.plugin_dirs : NULL, NULL, &ld, &err) == 0 &&
        sy_loader_list(ld, &host.api, &l, &n, &err) == 0) {
        for (size_t i = 0; i < n && count < 16; i++) {
            if (!l[i].desc || l[i].desc->kind != SY_KIND_COMM || l[i].score <= 0)
                continue;
            int dup = 0;
            for (int j = 0; j < count; j++)
                dup |= !strcmp(names[j], l[i].desc->name);
            if (!dup)
                snprintf(names[count++], 64, "%s", l[i].desc->name);
        }
        sy_loader_list_free(ld, l, n);
    } else if (err.msg[0]) {
        fprintf(stderr, "switchyard bench-comm: %s\n", err.msg);
    }
    if (ld)
        sy_loader_free(ld);
    if (cfg)
        sy_config_free(cfg);
    sy_host_fini(&host);
    return count;
}

/*
 * available_plugins in a child process: the GPU plugins' probes initialise
 * the CUDA driver, and a process that did cannot hand a working CUDA to the
 * ranks it forks afterwards. Returns the count, or 0 (printed) on failure.
 */
static int available_plugins_forked(bench_opts *o, char names[16][64])
{
    int fd[2];
    if (pipe(fd) != 0) {
        perror("switchyard bench-comm: pipe");
        return 0;
    }
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
        perror("switchyard bench-comm: fork");
        close(fd[0]);
        close(fd[1]);
        return 0;
    }
    if (pid == 0) {
        close(fd[0]);
        int n = available_plugins(o, names);
        const int ok = write(fd[1], &n, sizeof n) == (ssize_t)sizeof n &&
                       write(fd[1], names, sizeof(char[16][64])) == (ssize_t)sizeof(char[16][64]);
        fflush(stderr);
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    int n = 0;
    size_t got = 0;
    char *dst = (char *)names;
    ssize_t k = read(fd[0], &n, sizeof n);
    while (k == (ssize_t)sizeof n && got < sizeof(char[16][64])) {
        const ssize_t m = read(fd[0], dst + got, sizeof(char[16][64]) - got);
        if (m <= 0)
            break;
        got += (size_t)m;
    }
    close(fd[0]);
    int ws = 0;
    waitpid(pid, &ws, 0);
    if (k != (ssize_t)sizeof n || got != sizeof(char[16][64]) || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        return 0;
    return n < 0 ? 0 : n > 16 ? 16 : n;
}

int sy_cmd_bench_comm(int argc, char **argv)
{
    bench_opts o;
    memset(&o, 0, sizeof o);
    o.plugin = "all";
    o.ranks = 2;
    o.min_bytes = 8;
    o.max_bytes = 64ull << 20;
    o.factor = 2;
    o.warmup = 5;
    o.timeout_s = 30;
    if (parse_args(argc, argv, &o))
        return 2;
    if (o.ranks > 256) {
        fprintf(stderr, "switchyard bench-comm: --ranks %d, at most 256\n", o.ranks);
        return 2;
    }
    if (o.launched) {
        static const char *const rank_env[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
        static const char *const size_env[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
        static const char *const local_env[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", NULL};
        const int rank = env_int(rank_env, -1), world = env_int(size_env, -1), local = env_int(local_env, 0);
        if (strcmp(o.plugin, "mpi") != 0 && (rank < 0 || world < 1)) {
            fprintf(stderr, "switchyard bench-comm: --launched, but no launcher set OMPI_COMM_WORLD_RANK/SIZE\n");
            return 2;
        }
        return run_rank(&o, strcmp(o.plugin, "all") ? o.plugin : "mpi", rank, local, world,
                        o.rendezvous ? o.rendezvous : "bench-launched");
    }
    char names[16][64];
    int n = 1;
    if (strcmp(o.plugin, "all") == 0) {
        n = available_plugins_forked(&o, names);
        if (n == 0) {
            fprintf(stderr, "switchyard bench-comm: no comm plugin can run here (see `switchyard plugins`)\n");
            return 1;
        }
    } else {
        snprintf(names[0], sizeof names[0], "%s", o.plugin);
    }
    int status = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], "mpi") == 0) {
            printf("# comm plugin mpi: ranks come from mpirun; run\n"
                   "#   mpirun -n %d switchyard bench-comm --plugin mpi --launched\n"
                   "# (as root add --allow-run-as-root; in a container --oversubscribe --mca btl self,vader)\n#\n",
                   o.ranks);
            fflush(stdout);
            continue;
        }
        const int world = strcmp(names[i], "local") == 0 ? 1 : o.ranks;
        status |= run_forked(&o, names[i], world);
    }
    return status;
}
