/* frontend/http: growable byte buffers and small helpers. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

static int hbuf_reserve(hbuf *b, size_t extra)
{
    if (b->off && b->off + b->len + extra > b->cap) {
        /* Slide the live bytes to the front before growing. */
        memmove(b->p, b->p + b->off, b->len);
        b->off = 0;
    }
    if (b->off + b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->off + b->len + extra + 1) {
        if (cap > ((size_t)-1) / 2)
            return -1;
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int hbuf_append(hbuf *b, const void *data, size_t n)
{
    if (hbuf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->p + b->off + b->len, data, n);
    b->len += n;
    b->p[b->off + b->len] = '\0';
    return 0;
}

int hbuf_puts(hbuf *b, const char *s)
{
    return hbuf_append(b, s, strlen(s));
}

int hbuf_printf(hbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    if ((size_t)n < sizeof small)
        return hbuf_append(b, small, (size_t)n);
    if (hbuf_reserve(b, (size_t)n) < 0)
        return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->off + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void hbuf_consume(hbuf *b, size_t n)
{
    if (n >= b->len) {
        b->off = 0;
        b->len = 0;
        if (b->p)
            b->p[0] = '\0';
        return;
    }
    b->off += n;
    b->len -= n;
}

void hbuf_reset(hbuf *b)
{
    hbuf_consume(b, b->len);
}

void hbuf_free(hbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

int http_ct_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Walk the longer length so the time depends on lengths only. */
    size_t n = alen > blen ? alen : blen;
    unsigned diff = alen != blen; /* not alen ^ blen: truncated to unsigned it could cancel out */
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < alen ? (unsigned char)a[i] : 0;
        unsigned char y = i < blen ? (unsigned char)b[i] : 0;
        diff |= (unsigned)(x ^ y);
    }
    return diff == 0;
}
