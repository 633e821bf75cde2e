#include "config.h"

#include "serve/sched_generate.h"
#include "util/util.h"

#include <string.h>

typedef struct gen_run {
    sy_gen_token_fn fn;
    void *arg;
    sy_gen_stats *stats;
    double t0, t_first;
    bool stop_asked, done;
    char finish[16];
    char error[512];
    int status;
} gen_run;

static void on_event(void *user, const sy_event *ev)
{
    gen_run *g = user;
    for (size_t i = 0; i < ev->n_tokens; i++) {
        if (g->stats->generated++ == 0)
            g->t_first = sy_now();
        if (g->fn && !g->stop_asked && g->fn(g->arg, ev->tokens[i], NULL))
            g->stop_asked = true;
    }
    if (ev->type == SY_EV_DONE) {
        g->done = true;
        snprintf(g->finish, sizeof g->finish, "%s", ev->finish_reason ? ev->finish_reason : "stop");
    } else if (ev->type == SY_EV_ERROR) {
        g->done = true;
        g->status = ev->status;
        snprintf(g->error, sizeof g->error, "%s", ev->error ? ev->error : "generation failed");
    }
}

int sy_sched_generate(sy_engine *e, const sy_config *cfg, const int32_t *prompt, int32_t n_prompt,
                      const sy_gen_params *p, sy_gen_token_fn fn, void *arg, sy_gen_stats *stats,
                      sy_sched_stats *sched_stats, sy_err *err)
{
    memset(stats, 0, sizeof *stats);
    stats->prompt_tokens = n_prompt;
    stats->finish = "length";
    if (sched_stats)
        memset(sched_stats, 0, sizeof *sched_stats);
    gen_run g = {.fn = fn, .arg = arg, .stats = stats, .t0 = sy_now()};
    const sy_request req = {.struct_size = sizeof req,
                            .prompt_ids = prompt,
                            .n_prompt = n_prompt > 0 ? (size_t)n_prompt : 0,
                            .max_tokens = p->max_tokens,
                            .temperature = p->sampling.temperature,
                            .top_p = p->sampling.top_p,
                            .top_k = p->sampling.top_k,
                            .min_p = p->sampling.min_p,
                            .repetition_penalty = 1.0f,
                            .seed = p->sampling.seed,
                            .has_seed = 1,
                            .ignore_eos = p->ignore_eos,
                            .skip_special = 1,
                            .top_logprobs = -1,
                            .on_event = on_event,
                            .user = &g};
    sy_sched *s = NULL;
    sy_seq *q = NULL;
    int rc = sy_sched_new(e, NULL, &s, err);
    if (rc || (rc = sy_sched_enable_spec(s, cfg, err)) || (rc = sy_seq_new(&req, e, NULL, 1, &q, err))) {
        sy_sched_free(s);
        return rc;
    }
    sy_sched_add(s, q);
    while (!g.done) {
        if ((rc = sy_sched_step(s, err)) < 0)
            break;
        if (rc == 0 && sy_sched_idle(s))
            break;
        rc = SY_OK;
        if (g.stop_asked && !g.done)
            sy_sched_cancel(s, 1);
    }
    const double t1 = sy_now();
    stats->prefill_s = g.t_first > 0 ? g.t_first - g.t0 : t1 - g.t0;
    stats->decode_s = g.t_first > 0 ? t1 - g.t_first : 0.0;
    /* sy_generate's names: "stop" (EOS or a stop id), "length" (max_tokens), "max_seq_len" (the context). */
    if (strcmp(g.finish, "stop") == 0)
        stats->finish = "stop";
    else if (n_prompt + stats->generated >= sy_engine_max_seq_len(e) && stats->generated < p->max_tokens)
        stats->finish = "max_seq_len";
    if (!rc && g.error[0])
        rc = sy_err_set(err, SY_ERR_INTERNAL, "%s", g.error);
    if (sched_stats)
        sy_sched_stats_get(s, sched_stats);
    sy_sched_free(s);
    return rc;
}
