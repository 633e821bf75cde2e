#include "config.h"

#include "serve/text_filter.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char THINK_OPEN[] = "<think>";
static const char THINK_CLOSE[] = "</think>";

int sy_buf_append(sy_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

void sy_buf_consume(sy_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
    } else {
        memmove(b->p, b->p + n, b->len - n);
        b->len -= n;
    }
    if (b->p)
        b->p[b->len] = '\0';
}

void sy_buf_free(sy_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

int sy_text_filter_init(sy_text_filter *f, const char *const *stops, size_t n_stops, bool reasoning,
                        bool start_in_think)
{
    memset(f, 0, sizeof *f);
    f->reasoning = reasoning;
    f->in_think = reasoning && start_in_think;
    if (n_stops) {
        f->stops = calloc(n_stops, sizeof *f->stops);
        if (!f->stops)
            return -1;
    }
    for (size_t i = 0; i < n_stops; i++) {
        if (!stops[i] || !*stops[i])
            continue;
        size_t l = strlen(stops[i]);
        if (!(f->stops[f->n_stops] = malloc(l + 1))) {
            sy_text_filter_fini(f);
            return -1;
        }
        memcpy(f->stops[f->n_stops++], stops[i], l + 1);
        if (l > f->max_stop)
            f->max_stop = l;
    }
    return 0;
}

void sy_text_filter_fini(sy_text_filter *f)
{
    for (size_t i = 0; i < f->n_stops; i++)
        free(f->stops[i]);
    free(f->stops);
    sy_buf_free(&f->held);
    sy_buf_free(&f->think_held);
    memset(f, 0, sizeof *f);
}

/* Moves n back to the start of a UTF-8 character so no half character is emitted. */
static size_t utf8_floor(const char *s, size_t n, size_t len)
{
    while (n > 0 && n < len && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_suffix(const char *s, size_t n, const char *tag)
{
    size_t tl = strlen(tag);
    for (size_t k = tl - 1; k > 0; k--)
        if (k <= n && memcmp(s + n - k, tag, k) == 0)
            return k;
    return 0;
}

/* The reasoning split: routes s into content / reasoning, holding back a partial tag. */
static int think_push(sy_text_filter *f, const char *s, size_t n, bool final, sy_buf *content, sy_buf *reasoning)
{
    if (!f->reasoning)
        return sy_buf_append(content, s, n);
    if (sy_buf_append(&f->think_held, s, n))
        return -1;
    sy_buf *h = &f->think_held;
    for (;;) {
        const char *tag = f->in_think ? THINK_CLOSE : THINK_OPEN;
        sy_buf *dst = f->in_think ? reasoning : content;
        const char *hit = h->len ? strstr(h->p, tag) : NULL;
        if (hit) {
            size_t at = (size_t)(hit - h->p);
            if (sy_buf_append(dst, h->p, at))
                return -1;
            sy_buf_consume(h, at + strlen(tag));
            f->in_think = !f->in_think;
            continue;
        }
        size_t keep = final ? 0 : partial_suffix(h->p ? h->p : "", h->len, tag);
        if (sy_buf_append(dst, h->p, h->len - keep))
            return -1;
        sy_buf_consume(h, h->len - keep);
        return 0;
    }
}

int sy_text_filter_push(sy_text_filter *f, const char *text, size_t len, bool check_stops, bool final,
                        sy_buf *content, sy_buf *reasoning)
{
    if (f->stopped)
        return 1;
    if (sy_buf_append(&f->held, text, len))
        return -1;
    sy_buf *h = &f->held;
    size_t release = h->len;
    int stopped = 0;
    if (check_stops && f->n_stops) {
        /* The earliest match wins: text before it is emitted, the rest dropped. */
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < f->n_stops; i++) {
            const char *hit = strstr(h->p, f->stops[i]);
            if (hit && (size_t)(hit - h->p) < best)
                best = (size_t)(hit - h->p);
        }
        if (best != SIZE_MAX) {
            release = best;
            stopped = 1;
        } else if (!final) {
            /* Keep the longest tail that could still start a stop string. */
            size_t keep = 0;
            for (size_t i = 0; i < f->n_stops; i++) {
                size_t k = partial_suffix(h->p, h->len, f->stops[i]);
                if (k > keep)
                    keep = k;
            }
            release = utf8_floor(h->p, h->len - keep, h->len);
        }
    }
    if (think_push(f, h->p, release, final || stopped, content, reasoning))
        return -1;
    sy_buf_consume(h, stopped ? h->len : release);
    if (stopped)
        f->stopped = true;
    return stopped;
}

bool sy_text_ends_in_think(const char *text, size_t len)
{
    /* The last <think> after the last </think> means the prompt left one open. */
    const char *open = NULL, *close = NULL;
    for (const char *p = text; p && (size_t)(p - text) < len;) {
        const char *o = strstr(p, THINK_OPEN), *c = strstr(p, THINK_CLOSE);
        if (!o && !c)
            break;
        if (o && (!c || o < c)) {
            open = o;
            p = o + 1;
        } else {
            close = c;
            p = c + 1;
        }
    }
    return open && (!close || open > close);
}
