/*
 * switchyard bench: the server's speculative-decoding counters. GET
 * /metrics before and after each level; the difference of the three
 * switchyard_spec_* counters (core/spec/spec.h) of each method label gives
 * the level's acceptance rate and mean accepted length. A server without
 * them (vLLM, llama-server, a switchyard that does not speculate) adds
 * nothing to the table or the JSON.
 */
#include "config.h"

#include "bench/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const counter_names[3] = {"switchyard_spec_draft_tokens_total",
                                             "switchyard_spec_accepted_tokens_total",
                                             "switchyard_spec_verifies_total"};

static bench_spec_method *method_slot(bench_spec_counts *c, const char *m, size_t len)
{
    for (int i = 0; i < c->n; i++)
        if (strlen(c->m[i].method) == len && !strncmp(c->m[i].method, m, len))
            return &c->m[i];
    if (c->n == BENCH_MAX_SPEC || len >= sizeof c->m[0].method)
        return NULL;
    bench_spec_method *s = &c->m[c->n++];
    memset(s, 0, sizeof *s);
    memcpy(s->method, m, len);
    return s;
}

/* One exposition line: NAME{...,method="X",...} VALUE. */
static void parse_line(bench_spec_counts *c, const char *line, size_t len)
{
    for (int k = 0; k < 3; k++) {
        const size_t nl = strlen(counter_names[k]);
        if (len <= nl || strncmp(line, counter_names[k], nl) != 0 || line[nl] != '{')
            continue;
        const char *close = memchr(line + nl, '}', len - nl);
        if (!close)
            return;
        const char *m = NULL;
        for (const char *p = line + nl; p + 8 <= close; p++)
            if (!strncmp(p, "method=\"", 8)) {
                m = p + 8;
                break;
            }
        const char *q = m ? memchr(m, '"', (size_t)(close - m)) : NULL;
        if (!q)
            return;
        char num[64];
        size_t vl = (size_t)(line + len - (close + 1));
        if (vl >= sizeof num)
            return;
        memcpy(num, close + 1, vl);
        num[vl] = '\0';
        char *end = NULL;
        double v = strtod(num, &end);
        if (end == num)
            return;
        bench_spec_method *s = method_slot(c, m, (size_t)(q - m));
        if (s)
            s->v[k] = v;
        return;
    }
}

int bench_scrape_spec(const bench_opts *o, bench_spec_counts *out)
{
    memset(out, 0, sizeof *out);
    int status = 0;
    char *resp = NULL, err[512];
    if (bench_http_simple(o, "GET", "/metrics", NULL, &status, &resp, err, sizeof err) < 0 || status != 200) {
        free(resp);
        return -1;
    }
    for (const char *p = resp; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len && p[len - 1] == '\r')
            len--;
        if (*p != '#')
            parse_line(out, p, len);
        p += nl ? (size_t)(nl - p) + 1 : strlen(p);
    }
    free(resp);
    return 0;
}

void bench_spec_delta(const bench_spec_counts *before, const bench_spec_counts *after, bench_stats *s)
{
    s->n_spec = 0;
    for (int i = 0; i < after->n; i++) {
        const bench_spec_method *a = &after->m[i];
        const bench_spec_method *b = NULL;
        for (int j = 0; j < before->n; j++)
            if (!strcmp(before->m[j].method, a->method))
                b = &before->m[j];
        bench_spec_level *l = &s->spec[s->n_spec];
        for (int k = 0; k < 3; k++)
            l->v[k] = a->v[k] - (b ? b->v[k] : 0);
        /* A method that verified nothing in this level: the server has it, but did not use it. */
        if (l->v[2] <= 0 || l->v[0] <= 0)
            continue;
        snprintf(l->method, sizeof l->method, "%s", a->method);
        l->acceptance = l->v[1] / l->v[0];
        l->mean_accepted_length = 1.0 + l->v[1] / l->v[2];
        s->n_spec++;
    }
}
