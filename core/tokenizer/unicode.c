/*
 * UTF-8 and the Unicode operations the normalizers need: NFC/NFD/NFKC/NFKD
 * (UAX #15: full decomposition, canonical reordering, canonical
 * composition, Hangul done arithmetically) and context-free lowercasing.
 * Invalid UTF-8 bytes travel through as "raw" values above U+10FFFF so
 * that nothing is ever rejected or lost.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/unicode_data.h"
#include "util/utf8.h"

uint32_t sy__utf8_next(const char *s, size_t n, size_t *adv)
{
    const uint8_t *u = (const uint8_t *)s;
    uint8_t b = u[0];
    *adv = 1;
    if (b < 0x80)
        return b;
    size_t need;
    uint32_t cp;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
        cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        cp = b & 0x0F;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        cp = b & 0x07;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    } else {
        return SY__UNI_RAW(b);
    }
    if (n < need + 1)
        return SY__UNI_RAW(b);
    for (size_t i = 1; i <= need; i++) {
        uint8_t c = u[i];
        if (i == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF))
            return SY__UNI_RAW(b);
        cp = (cp << 6) | (c & 0x3F);
    }
    *adv = need + 1;
    return cp;
}

size_t sy__utf8_put(uint32_t cp, char out[4])
{
    if (cp >= 0x110000) {
        out[0] = (char)(uint8_t)(cp - 0x110000);
        return 1;
    }
    return sy_utf8_encode(cp, out);
}

bool sy__utf8_valid(const char *s, size_t n)
{
    size_t i = 0, adv;
    while (i < n) {
        if (sy__utf8_next(s + i, n - i, &adv) >= 0x110000)
            return false;
        i += adv;
    }
    return true;
}

bool sy__uni_is_white_space(uint32_t cp)
{
    /* The White_Space property (PropList.txt), what Rust's
     * char::is_whitespace and Oniguruma's \s test. */
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

uint32_t sy__uni_class(uint32_t cp)
{
    if (cp < 0x300)
        return 0;
    size_t lo = 0, hi = sy__uni_ccc_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *r = &sy__uni_ccc[mid * 3];
        if (cp < r[0])
            hi = mid;
        else if (cp > r[1])
            lo = mid + 1;
        else
            return r[2];
    }
    return 0;
}

/* Hangul syllable arithmetic (Unicode ch. 3.12). */
enum {
    SY__SBASE = 0xAC00,
    SY__LBASE = 0x1100,
    SY__VBASE = 0x1161,
    SY__TBASE = 0x11A7,
    SY__LCOUNT = 19,
    SY__VCOUNT = 21,
    SY__TCOUNT = 28,
    SY__NCOUNT = SY__VCOUNT * SY__TCOUNT,
    SY__SCOUNT = SY__LCOUNT * SY__NCOUNT
};

typedef struct {
    uint32_t *v;
    size_t n, cap;
} sy__cpvec;

static int sy__cp_push(sy__cpvec *v, uint32_t cp)
{
    if (v->n == v->cap) {
        uint32_t *p = sy__grow(v->v, &v->cap, sizeof *p, 64);
        if (!p)
            return SY_ERR_NOMEM;
        v->v = p;
    }
    v->v[v->n++] = cp;
    return 0;
}

static int sy__decompose(uint32_t cp, bool compat, sy__cpvec *out)
{
    if (cp >= SY__SBASE && cp < SY__SBASE + SY__SCOUNT) {
        uint32_t s = cp - SY__SBASE;
        if (sy__cp_push(out, SY__LBASE + s / SY__NCOUNT) || sy__cp_push(out, SY__VBASE + (s % SY__NCOUNT) / SY__TCOUNT))
            return SY_ERR_NOMEM;
        if (s % SY__TCOUNT && sy__cp_push(out, SY__TBASE + s % SY__TCOUNT))
            return SY_ERR_NOMEM;
        return 0;
    }
    if (cp >= 0xA0 && cp < 0x110000) {
        size_t lo = 0, hi = sy__uni_decomp_n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            uint32_t c = sy__uni_decomp[mid * 2];
            if (cp < c) {
                hi = mid;
            } else if (cp > c) {
                lo = mid + 1;
            } else {
                uint32_t info = sy__uni_decomp[mid * 2 + 1];
                uint32_t off = info >> 10, dlen = (info >> 5) & 31, klen = info & 31;
                const uint32_t *seq = sy__uni_decomp_seq + off;
                size_t len = dlen;
                if (compat && klen) {
                    seq += dlen;
                    len = klen;
                }
                if (!len)
                    break; /* canonical form of a compat-only entry: itself */
                for (size_t i = 0; i < len; i++)
                    if (sy__cp_push(out, seq[i]))
                        return SY_ERR_NOMEM;
                return 0;
            }
        }
    }
    return sy__cp_push(out, cp);
}

static uint32_t sy__compose_pair(uint32_t a, uint32_t b)
{
    if (a >= SY__LBASE && a < SY__LBASE + SY__LCOUNT && b >= SY__VBASE && b < SY__VBASE + SY__VCOUNT)
        return SY__SBASE + ((a - SY__LBASE) * SY__VCOUNT + (b - SY__VBASE)) * SY__TCOUNT;
    if (a >= SY__SBASE && a < SY__SBASE + SY__SCOUNT && (a - SY__SBASE) % SY__TCOUNT == 0 && b > SY__TBASE &&
        b < SY__TBASE + SY__TCOUNT)
        return a + (b - SY__TBASE);
    size_t lo = 0, hi = sy__uni_comp_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *r = &sy__uni_comp[mid * 3];
        if (a < r[0] || (a == r[0] && b < r[1]))
            hi = mid;
        else if (a > r[0] || b > r[1])
            lo = mid + 1;
        else
            return r[2];
    }
    return 0;
}

int sy__uni_normalize(int form, const char *s, size_t n, sy_tok_buf *out)
{
    bool compat = form == SY__NFKC || form == SY__NFKD;
    bool compose = form == SY__NFC || form == SY__NFKC;
    sy__cpvec v = {0};
    int rc = 0;
    out->len = 0;
    for (size_t i = 0, adv; i < n; i += adv) {
        uint32_t cp = sy__utf8_next(s + i, n - i, &adv);
        if ((rc = sy__decompose(cp, compat, &v)))
            goto done;
    }
    /* Canonical ordering: stable sort of each run of non-starters by class. */
    for (size_t i = 1; i < v.n; i++) {
        uint32_t c = v.v[i], cc = sy__uni_class(c);
        if (!cc)
            continue;
        size_t j = i;
        while (j > 0) {
            uint32_t pc = sy__uni_class(v.v[j - 1]);
            if (pc <= cc)
                break;
            v.v[j] = v.v[j - 1];
            j--;
        }
        v.v[j] = c;
    }
    if (compose && v.n) {
        /* UAX #15 canonical composition; a leading non-starter blocks
         * composition until the first starter (class 256 stands for that). */
        size_t starter = 0, w = 1;
        uint32_t starter_cp = v.v[0];
        uint32_t last = sy__uni_class(starter_cp) ? 256 : 0;
        for (size_t r = 1; r < v.n; r++) {
            uint32_t c = v.v[r], cc = sy__uni_class(c);
            uint32_t comp = sy__compose_pair(starter_cp, c);
            if (comp && (last < cc || last == 0)) {
                v.v[starter] = comp;
                starter_cp = comp;
                continue;
            }
            if (cc == 0) {
                starter = w;
                starter_cp = c;
            }
            last = cc;
            v.v[w++] = c;
        }
        v.n = w;
    }
    if ((rc = sy__buf_reserve(out, v.n * 4)))
        goto done;
    for (size_t i = 0; i < v.n; i++)
        out->len += sy__utf8_put(v.v[i], out->p + out->len);
    out->p[out->len] = 0;
done:
    free(v.v);
    return rc;
}

static uint32_t sy__lower1(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    size_t lo = 0, hi = sy__uni_lower_n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint32_t c = sy__uni_lower[mid * 2];
        if (cp < c)
            hi = mid;
        else if (cp > c)
            lo = mid + 1;
        else
            return sy__uni_lower[mid * 2 + 1];
    }
    return cp;
}

int sy__uni_lowercase(const char *s, size_t n, sy_tok_buf *out)
{
    out->len = 0;
    /* Lowercase grows UTF-8 by at most 3/2 (U+0130 -> "i\u0307"). */
    if (sy__buf_reserve(out, n * 2))
        return SY_ERR_NOMEM;
    for (size_t i = 0, adv; i < n; i += adv) {
        uint32_t cp = sy__utf8_next(s + i, n - i, &adv);
        if (cp == 0x130) {
            /* The one unconditional multi-character lowercase mapping. */
            memcpy(out->p + out->len, "i\xCC\x87", 3);
            out->len += 3;
            continue;
        }
        out->len += sy__utf8_put(cp < 0x110000 ? sy__lower1(cp) : cp, out->p + out->len);
    }
    out->p[out->len] = 0;
    return 0;
}
