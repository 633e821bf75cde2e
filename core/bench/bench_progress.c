/*
 * Progress while a level runs, on stderr: a bar redrawn in place when
 * stderr is a terminal (at most 10 times a second), else one line every
 * 5 seconds.
 */
#include "config.h"

#include "bench/bench.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void bench_progress_start(bench_progress *p, int enabled, const char *label, double now)
{
    memset(p, 0, sizeof *p);
    p->enabled = enabled;
    p->tty = isatty(STDERR_FILENO);
    p->t0 = now;
    p->last_print = now;
    snprintf(p->label, sizeof p->label, "%s", label);
}

void bench_progress_update(bench_progress *p, size_t done, size_t failed, size_t total, long out_tokens,
                           double now)
{
    if (!p->enabled)
        return;
    double interval = p->tty ? 0.1 : 5.0;
    if (now - p->last_print < interval && done < total)
        return;
    if (!p->tty && done == total)
        return; /* the table says it */
    p->last_print = now;
    double el = now - p->t0;
    if (p->tty) {
        char bar[41];
        size_t w = total ? done * 40 / total : 40;
        for (size_t i = 0; i < 40; i++)
            bar[i] = i < w ? '#' : '.';
        bar[40] = 0;
        fprintf(stderr, "\r%-12s [%s] %zu/%zu%s%.0zu %6.1fs %8.1f out tok/s ", p->label, bar, done, total,
                failed ? " failed " : "", failed, el, el > 0 ? (double)out_tokens / el : 0.0);
        p->tty = 2; /* something to clear */
    } else {
        fprintf(stderr, "bench %s: %zu/%zu done, %zu failed, %.1fs\n", p->label, done, total, failed, el);
    }
}

void bench_progress_end(bench_progress *p)
{
    if (p->enabled && p->tty == 2)
        fprintf(stderr, "\r%*s\r", 100, "");
}
