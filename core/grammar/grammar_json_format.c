/*
 * Leaf languages of the JSON schema compiler: string formats and bounded
 * integers, as GBNF expressions.
 *
 * Formats are spelt strictly (a subset of what each RFC allows) so that
 * what the grammar admits also passes the checkers of the python
 * jsonschema package: dates are real calendar dates (February stops at 28,
 * so no leap-year rule is needed; year 0000 is left out because Python's
 * date has none), times and date-times are RFC 3339 with an upper-case T
 * and Z, at most 6 fraction digits and no leap second.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "grammar/grammar_build.h"

const char sy_gformat_names[] = "date, time, date-time, uuid, email, ipv4";

#define DATE                                                                                                     \
    "([1-9] [0-9]{3} | \"0\" ([1-9] [0-9]{2} | \"0\" ([1-9] [0-9] | \"0\" [1-9])) ) \"-\" ("                     \
    "(\"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])" \
    " | (\"04\" | \"06\" | \"09\" | \"11\") \"-\" (\"0\" [1-9] | [12] [0-9] | \"30\")"                            \
    " | \"02\" \"-\" (\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]))"
#define HOUR "([01] [0-9] | \"2\" [0-3])"
#define TIME                                                                                                     \
    HOUR " \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [-+] " HOUR " \":\" [0-5] [0-9])"
#define HEX "[0-9a-fA-F]"
#define OCTET "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9] [0-9] | [0-9])"
#define EMAIL_ATOM "[a-zA-Z0-9_%+-]+"
#define LABEL "[a-zA-Z0-9] ([a-zA-Z0-9-]* [a-zA-Z0-9])?"

bool sy_gformat_emit(sy_gbuf *out, const char *fmt)
{
    if (!strcmp(fmt, "date"))
        sy_gbuf_puts(out, "(" DATE ")");
    else if (!strcmp(fmt, "time"))
        sy_gbuf_puts(out, "(" TIME ")");
    else if (!strcmp(fmt, "date-time"))
        sy_gbuf_puts(out, "(" DATE " \"T\" " TIME ")");
    else if (!strcmp(fmt, "uuid"))
        sy_gbuf_puts(out, "(" HEX "{8} \"-\" " HEX "{4} \"-\" " HEX "{4} \"-\" " HEX "{4} \"-\" " HEX "{12})");
    else if (!strcmp(fmt, "email"))
        sy_gbuf_puts(out, "(" EMAIL_ATOM " (\".\" " EMAIL_ATOM ")* \"@\" " LABEL " (\".\" " LABEL ")+)");
    else if (!strcmp(fmt, "ipv4"))
        sy_gbuf_puts(out, "(" OCTET " \".\" " OCTET " \".\" " OCTET " \".\" " OCTET ")");
    else
        return false;
    return true;
}

void sy_gformat_lengths(const char *fmt, long *min, long *max)
{
    static const struct {
        const char *name;
        long min, max;
    } lens[] = {{"date", 10, 10}, {"time", 9, 21}, {"date-time", 20, 32}, {"uuid", 36, 36}, {"ipv4", 7, 15}};
    *min = 0;
    *max = -1;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        if (!strcmp(fmt, lens[i].name)) {
            *min = lens[i].min;
            *max = lens[i].max;
        }
    if (!strcmp(fmt, "email"))
        *min = 5; /* a@b.c */
}

/* ------------------------------------------------------------ integer ranges */

static void digits_class(sy_gbuf *out, char lo, char hi)
{
    if (lo == hi)
        sy_gbuf_printf(out, "\"%c\"", lo);
    else
        sy_gbuf_printf(out, "[%c-%c]", lo, hi);
}

static void any_digits(sy_gbuf *out, size_t n)
{
    if (n == 1)
        sy_gbuf_puts(out, " [0-9]");
    else if (n > 1)
        sy_gbuf_printf(out, " [0-9]{%zu}", n);
}

/* The n-digit strings from x to y (x <= y, both n digits), digit by digit. */
static void same_length(sy_gbuf *out, const char *x, const char *y, size_t n)
{
    if (!memcmp(x, y, n)) {
        sy_gbuf_printf(out, "\"%.*s\"", (int)n, x);
        return;
    }
    if (x[0] == y[0]) {
        sy_gbuf_printf(out, "\"%c\" ", x[0]);
        same_length(out, x + 1, y + 1, n - 1);
        return;
    }
    bool low_full = true, high_full = true;
    for (size_t i = 1; i < n; i++) {
        low_full &= x[i] == '0';
        high_full &= y[i] == '9';
    }
    char mid_lo = low_full ? x[0] : (char)(x[0] + 1);
    char mid_hi = high_full ? y[0] : (char)(y[0] - 1);
    int alts = 0;
    sy_gbuf_puts(out, "(");
    if (!low_full) {
        char nines[24];
        memset(nines, '9', n - 1);
        sy_gbuf_printf(out, "\"%c\" ", x[0]);
        same_length(out, x + 1, nines, n - 1);
        alts++;
    }
    if (mid_lo <= mid_hi) {
        sy_gbuf_puts(out, alts++ ? " | " : "");
        digits_class(out, mid_lo, mid_hi);
        any_digits(out, n - 1);
    }
    if (!high_full) {
        char zeros[24];
        memset(zeros, '0', n - 1);
        sy_gbuf_puts(out, alts++ ? " | " : "");
        sy_gbuf_printf(out, "\"%c\" ", y[0]);
        same_length(out, zeros, y + 1, n - 1);
    }
    sy_gbuf_puts(out, ")");
}

static size_t n_digits(uint64_t v)
{
    size_t d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* 10^d - 1, saturated at UINT64_MAX (d up to 20). */
static uint64_t all_nines(size_t d)
{
    uint64_t v = 0;
    for (size_t i = 0; i < d; i++) {
        if (v > (UINT64_MAX - 9) / 10)
            return UINT64_MAX;
        v = v * 10 + 9;
    }
    return v;
}

/* Magnitudes in [a, b] (0 <= a <= b) without leading zeros. */
static void magnitude_range(sy_gbuf *out, uint64_t a, uint64_t b)
{
    size_t da = n_digits(a), db = n_digits(b);
    sy_gbuf_puts(out, "(");
    for (size_t d = da; d <= db; d++) {
        uint64_t lo = d == 1 ? 0 : all_nines(d - 1) + 1;
        uint64_t hi = all_nines(d);
        if (lo < a)
            lo = a;
        if (hi > b)
            hi = b;
        char x[24], y[24];
        snprintf(x, sizeof x, "%llu", (unsigned long long)lo);
        snprintf(y, sizeof y, "%llu", (unsigned long long)hi);
        sy_gbuf_puts(out, d > da ? " | " : "");
        same_length(out, x, y, d);
    }
    sy_gbuf_puts(out, ")");
}

/* Magnitudes >= a: those with a's digit count, then every longer one. */
static void magnitude_from(sy_gbuf *out, uint64_t a)
{
    size_t d = n_digits(a);
    sy_gbuf_puts(out, "(");
    magnitude_range(out, a, all_nines(d));
    if (d < SY_GJSON_MAX_DIGITS) /* longer ones, up to the digit bound of sy_gjson_basic_rules */
        sy_gbuf_printf(out, " | [1-9] [0-9]{%zu,%d}", d, SY_GJSON_MAX_DIGITS - 1);
    sy_gbuf_puts(out, ")");
}

static uint64_t magnitude(int64_t v) { return v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v; }

void sy_gint_range_emit(sy_gbuf *out, bool has_lo, int64_t lo, bool has_hi, int64_t hi)
{
    sy_gbuf_puts(out, "(");
    if (has_hi && hi < 0) {
        sy_gbuf_puts(out, "\"-\" ");
        if (has_lo)
            magnitude_range(out, magnitude(hi), magnitude(lo));
        else
            magnitude_from(out, magnitude(hi));
    } else if (has_lo && lo >= 0) {
        if (has_hi)
            magnitude_range(out, (uint64_t)lo, (uint64_t)hi);
        else
            magnitude_from(out, (uint64_t)lo);
    } else {
        sy_gbuf_puts(out, "\"-\" ");
        if (has_lo)
            magnitude_range(out, 1, magnitude(lo));
        else
            magnitude_from(out, 1);
        sy_gbuf_puts(out, " | ");
        if (has_hi)
            magnitude_range(out, 0, (uint64_t)hi);
        else
            magnitude_from(out, 0);
    }
    sy_gbuf_puts(out, ")");
}
