/* Test harness for the comm plugins (see comm_harness.h). */
#include "config.h"

#include "comm_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int comm_rank_open(comm_rank *r, const char *plugin, const char *const *sets)
{
    sy_err err = {{0}};
    memset(r, 0, sizeof *r);
    sy_host_init(&r->host);
    const char *dir = getenv("SY_PLUGIN_DIR");
    if (!dir) {
        fprintf(stderr, "comm test: SY_PLUGIN_DIR is not set (run through make check)\n");
        return -1;
    }
    r->cfg = sy_config_new();
    r->ld = sy_loader_new(dir, NULL);
    if (!r->cfg || !r->ld) {
        fprintf(stderr, "comm test: out of memory\n");
        return -1;
    }
    for (size_t i = 0; sets && sets[i]; i++)
        if (sy_config_set(r->cfg, sets[i], &err)) {
            fprintf(stderr, "comm test: --set %s: %s\n", sets[i], err.msg);
            return -1;
        }
    sy_plugin *p = NULL;
    if (sy_loader_resolve(r->ld, SY_KIND_COMM, plugin, NULL, &r->host.api, &p, &err) ||
        sy_plugin_create(p, &r->host.api, r->cfg, "comm", &r->pi, &err)) {
        fprintf(stderr, "comm test: comm plugin %s: %s\n", plugin, err.msg);
        return -1;
    }
    r->ops = r->pi->ops;
    r->inst = r->pi->inst;
    return 0;
}

int comm_rank_setup(comm_rank *r, int rank, int world, const char *rendezvous, double timeout_s, sy_err *err)
{
    const size_t need = offsetof(sy_comm_ops, setup) + sizeof r->ops->setup;
    if (r->ops->struct_size < need || !r->ops->setup)
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "comm test: the plugin has no setup op");
    int rc = r->ops->setup(r->inst, rank, world, rendezvous, timeout_s, err);
    if (rc == SY_OK) {
        r->rank = r->ops->rank(r->inst);
        r->world = r->ops->size(r->inst);
    }
    return rc;
}

void comm_rank_close(comm_rank *r)
{
    if (r->pi)
        sy_plugin_inst_destroy(r->pi);
    if (r->ld)
        sy_loader_free(r->ld);
    if (r->cfg)
        sy_config_free(r->cfg);
    sy_host_fini(&r->host);
    memset(r, 0, sizeof *r);
}

int comm_run_ranks(const char *tag, int world, comm_rank_fn fn, void *arg)
{
    char rendezvous[128];
    snprintf(rendezvous, sizeof rendezvous, "test-%ld-%ld-%.64s", (long)getpid(), (long)time(NULL), tag);
    pid_t pids[64];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] < 0) {
            perror("fork");
            world = r;
            break;
        }
        if (pids[r] == 0) {
            int st = fn(r, world, rendezvous, arg);
            fflush(stdout);
            fflush(stderr);
            _exit(st);
        }
    }
    int failed = 0;
    for (int r = 0; r < world; r++) {
        int ws = 0;
        if (waitpid(pids[r], &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "comm test: rank %d of %d failed (%s %d)\n", r, world,
                    WIFSIGNALED(ws) ? "signal" : "exit status", WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
            failed++;
        }
    }
    return failed;
}

float comm_test_value(unsigned seed, int r, size_t i)
{
    uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)r << 40) ^ (uint64_t)i;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    const float mant = (float)(x & 0xffffff) / (float)0x1000000 - 0.5f; /* [-0.5, 0.5) */
    const int e = (int)((x >> 24) % 16) - 8;                              /* 2^-8 .. 2^7 */
    return mant * (float)(e >= 0 ? (double)(1u << e) : 1.0 / (double)(1u << -e));
}
