/*
 * The text side of a request's output, between the incremental detokeniser
 * and the events: stop strings and the <think>...</think> split.
 *
 * Stop strings: text is held back while its tail could still begin a stop
 * string, so a stop string is never emitted, even when it spans tokens;
 * the matched text and everything after it are dropped.
 * Reasoning: with reasoning on, text between <think> and </think> goes to
 * the reasoning stream; a tag split across tokens is held back likewise.
 */
#ifndef SY_TEXT_FILTER_H
#define SY_TEXT_FILTER_H

#include <stdbool.h>
#include <stddef.h>

/* A growable byte buffer. */
typedef struct sy_buf {
    char *p;
    size_t len, cap;
} sy_buf;

int sy_buf_append(sy_buf *b, const char *s, size_t n); /* 0, or -1 when out of memory */
void sy_buf_consume(sy_buf *b, size_t n);              /* drops the first n bytes */
void sy_buf_free(sy_buf *b);

typedef struct sy_text_filter {
    char **stops; /* copies */
    size_t n_stops;
    size_t max_stop; /* longest stop string */
    bool reasoning;  /* split <think> blocks out */
    bool in_think;   /* inside <think> */
    sy_buf held;     /* text not yet through the stop check */
    sy_buf think_held; /* text through the stop check, not yet through the tag check */
    bool stopped;
} sy_text_filter;

/* Copies the stop strings (empty ones are ignored). 0, or -1 when out of memory. */
int sy_text_filter_init(sy_text_filter *f, const char *const *stops, size_t n_stops, bool reasoning,
                        bool start_in_think);
void sy_text_filter_fini(sy_text_filter *f);

/*
 * Feeds new text; appends what may be emitted now to content / reasoning.
 * check_stops false (before min_tokens) passes text through unchecked,
 * holding nothing back. final flushes everything held. Returns 1 when a
 * stop string matched (the filter then ignores further input), 0
 * otherwise, -1 when out of memory.
 */
int sy_text_filter_push(sy_text_filter *f, const char *text, size_t len, bool check_stops, bool final,
                        sy_buf *content, sy_buf *reasoning);

/* True when the text ends inside an open <think> (a template that opens it in the prompt). */
bool sy_text_ends_in_think(const char *text, size_t len);

#endif
