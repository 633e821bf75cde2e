/*
 * `switchyard plugin-check FILE.so`: what a plugin author runs before
 * shipping. Loads the file as the engine would (descriptor, ABI, struct
 * sizes, required ops, declared keys), probes it, creates it from
 * --set keys, then runs every op of its kind on seeded random inputs
 * against plugin-check's float64 reference (core/plugincheck/), one row
 * per op and case; --speed times the ops instead.
 */
#include "config.h"

#include "cli/commands.h"
#include "plugin/config.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "plugincheck/check.h"
#include "util/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: switchyard plugin-check [-v] [--speed] [--pool DEVICE.so] [--device DEVICE.so] [--time SECONDS] [--seed N] [--set key=value]... FILE.so\n"
               "Loads a plugin as the engine does, checks its descriptor, struct sizes, required ops and\n"
               "declared keys, probes and creates it (keys from --set, as in its config section), then runs\n"
               "each op of its kind on seeded random inputs against a float64 reference: one row per op\n"
               "and case with the largest error (max |got - ref| / max(1, max |ref|)) and the tolerance.\n"
               "Device, attn and moe plugins get their ops checked; comm single-rank semantics; frontend\n"
               "start/stop with a serving table that serves nothing. attn plugins must work on host memory\n"
               "(device cpu or none); moe plugins too, unless --device gives their device's plugin.\n"
               "  --speed         time each op (us per run) on larger shapes instead of checking it\n"
               "  --time SECONDS  how long --speed runs each op, at least (default 0.2)\n"
               "  --seed N        inputs' seed (default 1)\n"
               "  --pool DEVICE.so  run attn and moe ops on this cpu device plugin's workers, as the\n"
               "                  engine does (default: on one thread)\n"
               "  --device DEVICE.so  a moe plugin of another device (moe cuda: sy-device-cuda.so): its\n"
               "                  inputs and outputs go through this device plugin's memory\n"
               "  -v              show the plugin's info log lines\n"
               "Exit status: 0 every row OK or SKIP; 1 a row FAILed or the plugin was refused; 2 bad usage.\n");
}

/* A frontend's keys are read from [frontend:check]. */
static const char *section_of(int kind)
{
    const char *s = sy_kind_config_section(kind);
    return s ? s : "frontend:check";
}

/* The device's worker pool becomes host->parallel_for, as in the engine. */
static void on_device(void *user, const sy_plugin_desc *d, void *inst)
{
    sy_host_ctx *h = user;
    sy_device_parallel_for_fn run = NULL;
    sy_device_n_workers_fn nw = NULL;
    if (inst && d->get_proc) {
        void *a = d->get_proc("parallel_for"), *b = d->get_proc("n_workers");
        memcpy(&run, &a, sizeof run);
        memcpy(&nw, &b, sizeof nw);
    }
    sy_host_set_pool(h, run, nw, inst);
}

/* A cpu device plugin, created with its defaults, lending its workers to host->parallel_for. */
static int open_pool(const char *path, sy_host_ctx *host, const sy_config *cfg, sy_plugin_inst **out)
{
    sy_err err = {{0}};
    sy_plugin *p = NULL;
    int rc = sy_plugin_open(path, &p, &err);
    if (!rc && (p->desc->kind != SY_KIND_DEVICE || !p->desc->device || strcmp(p->desc->device, "cpu") != 0)) {
        sy_err_set(&err, SY_ERR_INVALID, "%s is not a cpu device plugin", path);
        sy_plugin_close(p);
        rc = SY_ERR_INVALID;
    }
    /* Its own section, absent from cfg: every key at its default. */
    if (!rc && (rc = sy_plugin_create(p, &host->api, cfg, "device", out, &err)) == SY_OK)
        on_device(host, (*out)->plugin->desc, (*out)->inst);
    if (rc)
        fprintf(stderr, "switchyard plugin-check: --pool %s: %s\n", path, err.msg);
    return rc;
}

static size_t ops_size_of(int kind)
{
    switch (kind) {
    case SY_KIND_DEVICE: return sizeof(sy_device_ops);
    case SY_KIND_ATTN: return sizeof(sy_attn_ops);
    case SY_KIND_MOE: return sizeof(sy_moe_ops);
    case SY_KIND_COMM: return sizeof(sy_comm_ops);
    default: return sizeof(sy_frontend_ops);
    }
}

int sy_cmd_plugin_check(int argc, char **argv)
{
    const char *file = NULL, *pool = NULL, *devfile = NULL;
    int speed = 0, verbose = 0;
    double min_time = 0.2;
    unsigned long long seed = 1;
    char **sets = calloc((size_t)argc + 1, sizeof *sets);
    int n_sets = 0;
    if (!sets) {
        fprintf(stderr, "switchyard plugin-check: out of memory\n");
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            free(sets);
            return 0;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            verbose = 1;
        } else if (strcmp(a, "--speed") == 0) {
            speed = 1;
        } else if (strcmp(a, "--pool") == 0 && i + 1 < argc) {
            pool = argv[++i];
        } else if (strcmp(a, "--device") == 0 && i + 1 < argc) {
            devfile = argv[++i];
        } else if ((strcmp(a, "--time") == 0 || strcmp(a, "--seed") == 0 || strcmp(a, "--set") == 0) && i + 1 < argc) {
            const char *v = argv[++i];
            char *end = NULL;
            if (strcmp(a, "--set") == 0) {
                sets[n_sets++] = argv[i];
                continue;
            }
            if (strcmp(a, "--time") == 0)
                min_time = strtod(v, &end);
            else
                seed = strtoull(v, &end, 10);
            if (!end || *end || !*v || min_time < 0 || min_time > 60) {
                fprintf(stderr, "switchyard plugin-check: %s %s: expected %s\n", a, v,
                        strcmp(a, "--time") == 0 ? "seconds in [0, 60]" : "a non-negative integer");
                free(sets);
                return 2;
            }
        } else if (a[0] == '-' || file) {
            fprintf(stderr, "switchyard plugin-check: unexpected argument \"%s\"%s\n", a,
                    a[0] == '-' ? " (or it lacks its value)" : ": one plugin file at a time");
            usage(stderr);
            free(sets);
            return 2;
        } else {
            file = a;
        }
    }
    if (!file) {
        fprintf(stderr, "switchyard plugin-check: no plugin file given\n");
        usage(stderr);
        free(sets);
        return 2;
    }

    /* The table is the output; plugins' info lines only with -v. */
    if (!verbose && sy_log_get_level() > SY_LOG_WARN)
        sy_log_set_level(SY_LOG_WARN);
    sy_err err = {{0}};
    sy_plugin *p = NULL;
    printf("%-8s %-14s %-48s %-4s %9s %6s\n", "KIND", "OP", "CASE", "", "MAX_ERR", "TOL");
    if (sy_plugin_open(file, &p, &err)) {
        printf("%-8s %-14s %-48s %-4s %9s %6s  %s\n", "?", "load", file, "FAIL", "-", "-", err.msg);
        printf("plugin-check: %s refused by the loader\n", file);
        free(sets);
        return 1;
    }
    const sy_plugin_desc *d = p->desc;
    sy_host_ctx host;
    sy_host_init(&host);
    if (d->kind == SY_KIND_FRONTEND)
        host.api.serving = sy_pc_fake_serving();
    sy_pc pc;
    memset(&pc, 0, sizeof pc);
    pc.desc = d;
    pc.path = file;
    pc.host = &host.api;
    pc.speed = speed;
    pc.min_time = min_time;
    pc.rng = seed * 0x9e3779b97f4a7c15ull + 1;
    pc.on_device = on_device;
    pc.user = &host;

    char note[700];
    uint32_t ops_size;
    memcpy(&ops_size, d->ops, sizeof ops_size);
    snprintf(note, sizeof note, "%s %s, ABI %u.%u, descriptor %u bytes (host %zu), ops table %u bytes (host %zu)",
             d->name, d->version ? d->version : "?", (unsigned)d->abi_major, (unsigned)d->abi_minor,
             (unsigned)d->struct_size, sizeof(sy_plugin_desc), (unsigned)ops_size, ops_size_of(d->kind));
    sy_pc_row(&pc, "descriptor", "loaded and validated", SY_PC_OK, -1, -1, note);
    size_t nk = 0, len = 0;
    note[0] = '\0';
    for (const sy_key_decl *k = d->keys; k && k->name; k++, nk++)
        len += (size_t)snprintf(note + len, len < sizeof note ? sizeof note - len : 0, "%s%s", nk ? ", " : "", k->name);
    sy_pc_row(&pc, "keys", nk ? "declared and well-formed" : "none declared", SY_PC_OK, -1, -1, note);

    int rc = 1;
    sy_config *cfg = sy_config_new();
    sy_plugin_inst *pi = NULL, *pool_inst = NULL, *dev_inst = NULL;
    if (!cfg) {
        fprintf(stderr, "switchyard plugin-check: out of memory\n");
        sy_plugin_close(p);
        goto out;
    }
    /* SWITCHYARD_SET applies here as in the engine (before --set): the tests pin matmul = f32 with it. */
    if (sy_config_apply_env(cfg, &err)) {
        fprintf(stderr, "switchyard plugin-check: %s\n", err.msg);
        sy_plugin_close(p);
        rc = 2;
        goto out;
    }
    if (pool && open_pool(pool, &host, cfg, &pool_inst)) {
        sy_plugin_close(p);
        rc = 2;
        goto out;
    }
    sy_err why = {{0}};
    int score = d->probe(&host.api, &why);
    why.msg[sizeof why.msg - 1] = '\0';
    if (score <= 0) {
        snprintf(note, sizeof note, "score %d: %s", score, why.msg[0] ? why.msg : "(no reason given)");
        sy_pc_row(&pc, "probe", "can it run here?", SY_PC_FAIL, -1, -1, note);
        sy_plugin_close(p);
        goto out;
    }
    snprintf(note, sizeof note, "score %d", score);
    sy_pc_row(&pc, "probe", "can it run here?", SY_PC_OK, -1, -1, note);
    const char *section = section_of(d->kind);
    for (int i = 0; i < n_sets; i++) {
        char a[4200];
        snprintf(a, sizeof a, "%s.%s", section, sets[i]);
        if (sy_config_set(cfg, a, &err)) {
            fprintf(stderr, "switchyard plugin-check: --set %s: %s\n", sets[i], err.msg);
            sy_plugin_close(p);
            rc = 2;
            goto out;
        }
    }
    /* Binds and checks the keys as the engine does; later instances reuse them. */
    if (sy_plugin_create(p, &host.api, cfg, section, &pi, &err)) {
        sy_pc_row(&pc, "create", "keys from --set", SY_PC_FAIL, -1, -1, err.msg);
        goto out;
    }
    sy_pc_row(&pc, "create", "keys from --set", SY_PC_OK, -1, -1, "");
    /* Every case makes its own instance from these keys; this first one is
     * destroyed now, so a frontend that binds a port or a comm that joins a
     * group does not hold it against the cases. */
    pc.cfg = pi->cfg;
    pc.n_cfg = pi->n_cfg;
    d->destroy(pi->inst);
    pi->inst = NULL;
    if (devfile && d->kind == SY_KIND_MOE) {
        sy_plugin *dp = NULL;
        int drc = sy_plugin_open(devfile, &dp, &err);
        if (!drc && (dp->desc->kind != SY_KIND_DEVICE || !dp->desc->device || !d->device ||
                     strcmp(dp->desc->device, d->device) != 0)) {
            drc = sy_err_set(&err, SY_ERR_INVALID, "%s is not a device plugin of device %s (the moe plugin's)", devfile,
                             d->device ? d->device : "(none)");
            sy_plugin_close(dp);
        }
        if (!drc && (drc = sy_plugin_create(dp, &host.api, cfg, "device", &dev_inst, &err)) == SY_OK) {
            pc.dev_ops = dev_inst->ops;
            pc.dev_inst = dev_inst->inst;
        }
        if (drc) {
            fprintf(stderr, "switchyard plugin-check: --device %s: %s\n", devfile, err.msg);
            rc = 2;
            goto out;
        }
    }
    if ((d->kind == SY_KIND_ATTN || d->kind == SY_KIND_MOE) && d->device && strcmp(d->device, "cpu") != 0 &&
        !pc.dev_ops) {
        snprintf(note, sizeof note, "works on device %s's memory; plugin-check drives attn plugins on host memory only, "
                 "moe plugins on another device's with --device", d->device);
        sy_pc_row(&pc, "ops", "-", SY_PC_SKIP, -1, -1, note);
    } else {
        switch (d->kind) {
        case SY_KIND_DEVICE: sy_pc_check_device(&pc); break;
        case SY_KIND_ATTN: sy_pc_check_attn(&pc); break;
        case SY_KIND_MOE: sy_pc_check_moe(&pc); break;
        case SY_KIND_COMM: sy_pc_check_comm(&pc); break;
        default: sy_pc_check_frontend(&pc); break;
        }
    }
    rc = pc.n_fail ? 1 : 0;
out:
    if (rc == 1 && pc.n_fail == 0)
        pc.n_fail = 1;
    printf("plugin-check: %s (%s %s): %d ok, %d failed, %d skipped\n", file, sy_kind_name(d->kind), d->name,
           pc.n_ok, pc.n_fail, pc.n_skip);
    sy_plugin_inst_destroy(pi);
    sy_plugin_inst_destroy(dev_inst);
    sy_host_set_pool(&host, NULL, NULL, NULL);
    sy_plugin_inst_destroy(pool_inst);
    sy_config_free(cfg);
    sy_host_fini(&host);
    free(sets);
    return rc;
}
