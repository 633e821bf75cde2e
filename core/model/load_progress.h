/*
 * A ready-made sy_load_progress_fn: on a terminal, one line updated in place
 * ("loading: 123/456 tensors, 1.2/3.4 GiB, 850 MiB/s, 3s left"); otherwise
 * (a log file, a service) an info log line at most every 5 seconds.
 *
 *     sy_load_progress lp;
 *     sy_load_progress_init(&lp, true);
 *     rc = sy_model_load(dir, sy_load_progress_report, &lp, &m, &err);
 *     sy_load_progress_done(&lp);
 */
#ifndef SY_LOAD_PROGRESS_H
#define SY_LOAD_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct sy_load_progress {
    bool enabled;    /* false: the callback does nothing */
    FILE *out;       /* the terminal line goes here (stderr) */
    bool tty;        /* updating line, else periodic log lines */
    double interval; /* seconds between updates: 0.1 on a terminal, 5 otherwise */
    double t_start;  /* time of the first report */
    double t_last;   /* time of the last line written */
    bool started;
    bool line_open; /* a terminal line without its newline yet */
} sy_load_progress;

/* enabled: report at all; the mode is decided by isatty(stderr). Tests may
 * set tty, interval and out afterwards. */
void sy_load_progress_init(sy_load_progress *p, bool enabled);
/* The callback; arg is a sy_load_progress. */
void sy_load_progress_report(void *arg, size_t tensors_done, size_t tensors_total, uint64_t bytes_done,
                             uint64_t bytes_total);
/* Ends a terminal line left open (a load that failed half-way). */
void sy_load_progress_done(sy_load_progress *p);
/* "123/456 tensors, 1.2/3.4 GiB, 850 MiB/s, 3s left" ("done in 4s" at the end). */
void sy_load_progress_format(char *buf, size_t cap, size_t tensors_done, size_t tensors_total, uint64_t bytes_done,
                             uint64_t bytes_total, double elapsed);

#endif
