/*
 * The engine's tensor-parallel group: opens [comm], joins the ranks (with
 * `auto`, trying the device's comm plugins in score order until one's setup
 * accepts) and works out this rank's share of the model.
 */
#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine_internal.h"
#include "plugin/config.h"
#include "util/log.h"

static bool has_setup(const sy_comm_ops *com)
{
    return com->struct_size >= offsetof(sy_comm_ops, setup) + sizeof com->setup && com->setup;
}

/* This rank's setup call; a refusal names the rank and the plugin. */
static int comm_setup(sy_engine *e, const sy_engine_dist *dist, const char *rendezvous, sy_err *err)
{
    const char *name = e->comm->plugin->desc->name;
    if (!has_setup(e->comm->ops))
        return sy_err_set(err, SY_ERR_UNSUPPORTED, "comm plugin %s has no setup op, so it cannot join %d ranks", name,
                          dist->world);
    const sy_comm_ops *com = e->comm->ops;
    int rc = com->setup(e->comm->inst, dist->rank, dist->world, rendezvous, dist->timeout_s, err);
    if (rc) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return sy_err_set(err, rc, "tensor parallel rank %d of %d: comm plugin %s cannot join the group: %s",
                          dist->rank, dist->world, name, why);
    }
    return SY_OK;
}

/*
 * Why `auto` passes over a comm plugin for the ranks of one node, or NULL:
 * local is a group of one, mpi takes its ranks from mpirun and tcp meets at
 * the HOST:PORT that only --nnodes opens (both named by the launcher there).
 */
static const char *auto_passes_over(const sy_plugin_desc *d)
{
    if (!strcmp(d->name, "local"))
        return "a group of one";
    if (!strcmp(d->name, "mpi"))
        return "its ranks come from mpirun";
    if (!strcmp(d->name, "tcp"))
        return "it meets at the HOST:PORT of --nnodes";
    if (!has_setup(d->ops))
        return "it has no setup op";
    return NULL;
}

/*
 * [comm] plugin = auto for a group: every candidate for the device, best
 * probe score first, until one's setup accepts. A refusal (UNAVAILABLE or
 * UNSUPPORTED) reaches every rank by the setup contract (plugin.h), so all
 * ranks move on together; any other error stops here, as a named plugin's
 * would. Each attempt after the first meets at "<rendezvous>-<plugin>", so
 * nothing the refused plugin left under the rendezvous is in the way.
 */
static bool declares(const sy_plugin_desc *d, const char *key)
{
    for (const sy_key_decl *k = d->keys; k && k->name; k++)
        if (!strcmp(k->name, key))
            return true;
    return false;
}

/*
 * Under auto each candidate gets the [comm] keys it declares (a cuda-p2p key
 * must not stop nccl, nor an nccl key cuda-p2p); a key that no candidate
 * declares is a config error naming where it was set.
 */
static int check_auto_keys(const sy_config *cfg, const sy_plugin_candidate *cand, size_t n, sy_err *err)
{
    const sy_config_entry *const *ents = NULL;
    const size_t ne = sy_config_section(cfg, "comm", &ents);
    for (size_t j = 0; j < ne; j++) {
        if (!strcmp(ents[j]->key, "plugin"))
            continue;
        bool any = false;
        for (size_t i = 0; i < n && !any; i++)
            any = !auto_passes_over(cand[i].plugin->desc) && declares(cand[i].plugin->desc, ents[j]->key);
        if (!any) {
            char where[300];
            if (ents[j]->line > 0)
                snprintf(where, sizeof where, "%s:%d", ents[j]->file, ents[j]->line);
            else
                snprintf(where, sizeof where, "%s", ents[j]->file);
            return sy_err_set(err, SY_ERR_INVALID,
                              "%s: [comm] %s: no comm plugin that [comm] plugin = auto tries here declares it "
                              "(`switchyard plugins` lists each plugin's keys); name the plugin it belongs to",
                              where, ents[j]->key);
        }
    }
    return SY_OK;
}

/* The instance of candidate p with the [comm] keys it declares (all of them: the config itself). */
static int create_candidate(sy_engine *e, const sy_config *cfg, sy_plugin *p, sy_err *err)
{
    const sy_config_entry *const *ents = NULL;
    const size_t ne = sy_config_section(cfg, "comm", &ents);
    bool all = true;
    for (size_t j = 0; j < ne && all; j++)
        all = !strcmp(ents[j]->key, "plugin") || declares(p->desc, ents[j]->key);
    if (all)
        return sy_plugin_create(p, &e->host.api, cfg, "comm", &e->comm, err);
    sy_config *own = sy_config_new();
    int rc = own ? SY_OK : sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    for (size_t j = 0; j < ne && !rc; j++) {
        if (strcmp(ents[j]->key, "plugin") == 0 || !declares(p->desc, ents[j]->key))
            continue;
        char set[1024];
        if (snprintf(set, sizeof set, "comm.%s=%s", ents[j]->key, ents[j]->value) >= (int)sizeof set)
            rc = sy_err_set(err, SY_ERR_INVALID, "[comm] %s: value longer than %zu characters", ents[j]->key,
                            sizeof set - 8);
        else
            rc = sy_config_set(own, set, err);
    }
    if (rc)
        sy_plugin_close(p);
    else
        rc = sy_plugin_create(p, &e->host.api, own, "comm", &e->comm, err);
    sy_config_free(own);
    return rc;
}

static int join_auto(sy_engine *e, const sy_config *cfg, const sy_engine_dist *dist, const char *device, sy_err *err)
{
    sy_plugin_candidate *cand = NULL;
    size_t n = 0;
    int rc = sy_loader_candidates(e->loader, SY_KIND_COMM, device, &e->host.api, &cand, &n, err);
    if (rc)
        return rc;
    if ((rc = check_auto_keys(cfg, cand, n, err))) {
        sy_loader_candidates_free(cand, n);
        return rc;
    }
    char refused[sizeof err->msg] = "";
    size_t used = 0;
    int attempts = 0;
    for (size_t i = 0; i < n; i++) {
        const sy_plugin_desc *d = cand[i].plugin->desc;
        const char *skip = auto_passes_over(d);
        if (skip) {
            sy_debug("tensor parallel: auto passes over comm %s (%s): %s", d->name, cand[i].plugin->path, skip);
            continue;
        }
        char rv[256];
        const int len = attempts ? snprintf(rv, sizeof rv, "%s-%s", dist->rendezvous, d->name)
                                 : snprintf(rv, sizeof rv, "%s", dist->rendezvous);
        if (len < 0 || (size_t)len >= sizeof rv) {
            rc = sy_err_set(err, SY_ERR_INVALID,
                            "tensor parallel: rendezvous \"%.40s...\" with \"-%s\" is longer than %zu characters",
                            dist->rendezvous, d->name, sizeof rv - 1);
            break;
        }
        sy_plugin *p = cand[i].plugin;
        cand[i].plugin = NULL; /* sy_plugin_create owns it now */
        if ((rc = create_candidate(e, cfg, p, err))) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            sy_err_set(err, rc, "tensor parallel: [comm] plugin = auto tried comm %s: %s", d->name, why);
            break;
        }
        attempts++;
        rc = comm_setup(e, dist, rv, err);
        if (rc == SY_OK) {
            if (refused[0])
                sy_info("tensor parallel: the %d ranks joined over comm %s ([comm] plugin = auto; refused: %s)",
                        dist->world, d->name, refused);
            else
                sy_info("tensor parallel: the %d ranks joined over comm %s ([comm] plugin = auto)", dist->world,
                        d->name);
            break;
        }
        if (rc != SY_ERR_UNAVAILABLE && rc != SY_ERR_UNSUPPORTED)
            break;
        /* Every rank refuses alike (the setup contract): rank 0 says it once. */
        if (dist->rank == 0)
            sy_warn("%s; [comm] plugin = auto tries the next comm plugin", err->msg);
        else
            sy_info("%s; [comm] plugin = auto tries the next comm plugin", err->msg);
        const int k = snprintf(refused + used, sizeof refused - used, "%s%s", used ? ", " : "", d->name);
        if (k > 0)
            used = used + (size_t)k < sizeof refused ? used + (size_t)k : sizeof refused - 1;
        sy_plugin_inst_destroy(e->comm);
        e->comm = NULL;
        rc = SY_OK;
    }
    if (!rc && !e->comm) {
        char last[sizeof err->msg];
        snprintf(last, sizeof last, "%s", attempts ? err->msg : "");
        rc = attempts ? sy_err_set(err, SY_ERR_UNAVAILABLE,
                                   "tensor parallel: [comm] plugin = auto: no comm plugin for device %s could join "
                                   "the %d ranks (refused: %s); the last said: %s",
                                   device ? device : "(any)", dist->world, refused, last)
                      : sy_err_set(err, SY_ERR_UNSUPPORTED,
                                   "tensor parallel: [comm] plugin = auto: no comm plugin for device %s can join %d "
                                   "ranks of one node (auto does not try local, mpi or tcp; `switchyard plugins` "
                                   "lists the others and why they cannot run)",
                                   device ? device : "(any)", dist->world);
    }
    sy_loader_candidates_free(cand, n);
    return rc;
}

/*
 * Opens [comm] and joins the tensor-parallel group (dist NULL or a world
 * of one: a group of one, nothing to join), then works out this rank's
 * share: the sizes must divide evenly.
 */
int sy__engine_join_group(sy_engine *e, const sy_config *cfg, const sy_engine_dist *dist, const char *device,
                          sy_err *err)
{
    e->tp_rank = 0;
    e->tp_size = 1;
    e->vocab_local = e->mc->vocab;
    e->vocab_start = 0;
    const char *spec = sy_config_get(cfg, "comm", "plugin");
    const bool group = dist && !(dist->world <= 1 && dist->rank >= 0);
    int rc;
    if (group && dist->world > 1 && spec && !strcmp(spec, "auto"))
        rc = join_auto(e, cfg, dist, device, err);
    else if (!(rc = sy__engine_open_plugin(e, cfg, "comm", SY_KIND_COMM, "local", device, &e->comm, err)) && group)
        rc = comm_setup(e, dist, dist->rendezvous, err);
    if (rc)
        return rc;
    e->com = e->comm->ops;
    if (!group) {
        e->expert_parallel = false; /* one rank holds every expert either way */
        return SY_OK;
    }
    const char *name = e->comm->plugin->desc->name;
    e->tp_rank = e->com->rank(e->comm->inst);
    e->tp_size = e->com->size(e->comm->inst);
    if (dist->world > 0 && e->tp_size != dist->world)
        return sy_err_set(err, SY_ERR_INVALID, "tensor parallel: expected %d ranks, comm plugin %s has %d",
                          dist->world, name, e->tp_size);
    e->expert_parallel = e->expert_parallel && e->tp_size > 1; /* one rank holds every expert either way */
    if ((rc = sy_engine_parallel_check(e->mc, e->tp_size, e->expert_parallel, err)))
        return rc;
    if (e->expert_parallel) {
        e->ep_count = e->mc->n_experts / e->tp_size;
        e->ep_first = e->tp_rank * e->ep_count;
    }
    e->vocab_local = e->mc->vocab / e->tp_size;
    e->vocab_start = e->tp_rank * e->vocab_local;
    e->chan = (sy_plan_chan){.rank = e->tp_rank, .world = e->tp_size, .sockets = dist->plan_fds != NULL,
                             .timeout_s = dist->timeout_s, .com = e->com, .comm_inst = e->comm->inst};
    const int n_fds = e->tp_rank == 0 ? e->tp_size : 1;
    if (dist->plan_fds && n_fds > (int)(sizeof e->chan.fds / sizeof e->chan.fds[0]))
        return sy_err_set(err, SY_ERR_INVALID, "tensor parallel: %d ranks, at most %zu", e->tp_size,
                          sizeof e->chan.fds / sizeof e->chan.fds[0]);
    for (int r = 0; dist->plan_fds && r < n_fds; r++)
        e->chan.fds[r] = dist->plan_fds[r];
    /* Well inside the followers' timeout, and often enough that a dead follower is noticed soon. */
    e->heartbeat_s = dist->timeout_s > 0 ? dist->timeout_s / 4 : 5.0;
    if (e->heartbeat_s > 5.0)
        e->heartbeat_s = 5.0;
    return SY_OK;
}
