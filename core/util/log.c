#include "config.h"

#include "util/log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

/* The one process-wide setting the core keeps outside a context struct:
 * stderr itself is process-wide, so its verbosity is too. */
static _Atomic int sy__log_level = SY_LOG_INFO;

void sy_log_set_level(sy_log_level level) { atomic_store(&sy__log_level, (int)level); }

sy_log_level sy_log_get_level(void) { return (sy_log_level)atomic_load(&sy__log_level); }

void sy_log(sy_log_level level, const char *fmt, ...)
{
    static const char *const tags[] = {"error", "warn", "info", "debug"};
    if ((int)level > atomic_load(&sy__log_level))
        return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    /* One fprintf per line so concurrent lines do not interleave. */
    fprintf(stderr, "%02d:%02d:%02d.%03ld switchyard %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000000, tags[level <= SY_LOG_DEBUG ? level : SY_LOG_DEBUG], buf);
}
