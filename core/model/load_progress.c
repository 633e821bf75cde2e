/* Load progress reporter for a terminal or a log. */
#include "config.h"

#include "model/load_progress.h"

#include "util/log.h"
#include "util/util.h"

#include <string.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * 1024.0 * 1024.0)

void sy_load_progress_init(sy_load_progress *p, bool enabled)
{
    memset(p, 0, sizeof *p);
    p->enabled = enabled;
    p->out = stderr;
    p->tty = isatty(STDERR_FILENO) != 0;
    p->interval = p->tty ? 0.1 : 5.0;
}

static void fmt_duration(char *buf, size_t cap, double s)
{
    long t = (long)(s + 0.5);
    if (t < 60)
        snprintf(buf, cap, "%lds", t);
    else if (t < 3600)
        snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, cap, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
}

void sy_load_progress_format(char *buf, size_t cap, size_t tensors_done, size_t tensors_total, uint64_t bytes_done,
                             uint64_t bytes_total, double elapsed)
{
    double unit = (double)bytes_total >= GIB ? GIB : MIB;
    const char *uname = unit == GIB ? "GiB" : "MiB";
    int n = snprintf(buf, cap, "%zu/%zu tensors, %.1f/%.1f %s", tensors_done, tensors_total,
                     (double)bytes_done / unit, (double)bytes_total / unit, uname);
    if (n < 0 || (size_t)n >= cap)
        return;
    char dur[32];
    bool done = tensors_done >= tensors_total && bytes_done >= bytes_total;
    if (elapsed < 1e-3 || bytes_done == 0) {
        if (done) {
            fmt_duration(dur, sizeof dur, elapsed);
            snprintf(buf + n, cap - (size_t)n, ", done in %s", dur);
        }
        return;
    }
    double rate = (double)bytes_done / elapsed;
    if (done)
        fmt_duration(dur, sizeof dur, elapsed);
    else
        fmt_duration(dur, sizeof dur, (double)(bytes_total - bytes_done) / rate);
    snprintf(buf + n, cap - (size_t)n, ", %.0f MiB/s, %s%s", rate / MIB, done ? "done in " : "", dur);
    if (!done)
        strncat(buf, " left", cap - strlen(buf) - 1);
}

void sy_load_progress_report(void *arg, size_t tensors_done, size_t tensors_total, uint64_t bytes_done,
                             uint64_t bytes_total)
{
    sy_load_progress *p = arg;
    if (!p || !p->enabled)
        return;
    double now = sy_now();
    if (!p->started) {
        p->started = true;
        p->t_start = now;
        p->t_last = now;
    }
    bool done = tensors_done >= tensors_total;
    bool first = tensors_done == 0;
    if (!done && !(p->tty && first) && now - p->t_last < p->interval)
        return;
    if (!p->tty && (first || done))
        return; /* the loader logs its own summary line at the end */
    char line[160];
    sy_load_progress_format(line, sizeof line, tensors_done, tensors_total, bytes_done, bytes_total,
                            now - p->t_start);
    p->t_last = now;
    if (p->tty) {
        fprintf(p->out, "\rloading: %s\033[K%s", line, done ? "\n" : "");
        fflush(p->out);
        p->line_open = !done;
    } else {
        sy_info("loading: %s", line);
    }
}

void sy_load_progress_done(sy_load_progress *p)
{
    if (p->tty && p->line_open) {
        fputc('\n', p->out);
        fflush(p->out);
    }
    p->line_open = false;
}
