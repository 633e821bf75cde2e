/* The streaming JSON normaliser (toolcall_internal.h) and the string escaper. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "toolcall/toolcall_internal.h"

enum {
    JV_VALUE,  /* a value may start (ws skipped) */
    JV_STRING, /* inside a string (key or value) */
    JV_ESC,    /* after a backslash */
    JV_UHEX,   /* reading the 4 digits of \u */
    JV_SURR1,  /* after a high surrogate: expecting '\' */
    JV_SURR2,  /* ... expecting 'u' */
    JV_NUMBER,
    JV_LITERAL,
    JV_AFTER, /* after a value inside a container: ',' or the close */
    JV_KEY,   /* expecting a key's '"' (or '}' when allow_close) */
    JV_COLON,
    JV_DONE
};

static void put(tc_jv *j, const char *s, size_t n)
{
    if (sy_buf_append(j->out, s, n))
        j->oom = true;
}

static void puts_(tc_jv *j, const char *s) { put(j, s, strlen(s)); }

void tc_jv_init(tc_jv *j, bool object_only, sy_buf *out)
{
    memset(j, 0, sizeof *j);
    j->st = JV_VALUE;
    j->object_only = object_only;
    j->out = out;
}

bool tc_jv_in_string(const tc_jv *j)
{
    return j->st == JV_STRING || j->st == JV_ESC || j->st == JV_UHEX || j->st == JV_SURR1 || j->st == JV_SURR2;
}

bool tc_jv_done(const tc_jv *j) { return j->st == JV_DONE; }

static bool valid_number(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n)
        return false;
    if (s[i] == '0')
        i++;
    else if (s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    else
        return false;
    if (i < n && s[i] == '.') {
        size_t d = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        if (i == d)
            return false;
    }
    return i == n;
}

/*
 * Writes the number read. JSON has no range, but readers do: an integer
 * beyond int64 is written as a real (jansson refuses it as an integer) and
 * a real beyond double as the largest double, so every reader gets a number.
 */
static void put_number(tc_jv *j)
{
    j->tok[j->ntok] = 0;
    bool integer = !strpbrk(j->tok, ".eE");
    errno = 0;
    if (integer) {
        (void)strtoll(j->tok, NULL, 10);
        put(j, j->tok, j->ntok);
        if (errno == ERANGE)
            puts_(j, ".0");
        return;
    }
    double d = strtod(j->tok, NULL);
    if (isinf(d))
        puts_(j, d < 0 ? "-1.7976931348623157e308" : "1.7976931348623157e308");
    else
        put(j, j->tok, j->ntok);
}

/* A value just ended: where the machine goes next. */
static int value_ended(tc_jv *j)
{
    if (j->depth == 0) {
        j->st = JV_DONE;
        return TC_JV_DONE;
    }
    j->st = JV_AFTER;
    return TC_JV_MORE;
}

static void emit_pending_comma(tc_jv *j)
{
    if (j->pend_comma) {
        puts_(j, ",");
        j->pend_comma = false;
    }
}

/* Closes everything open so what was written is one JSON value. */
void tc_jv_finish(tc_jv *j)
{
    switch (j->st) {
    case JV_DONE:
        return;
    case JV_VALUE:
        if (!j->started) {
            if (j->object_only)
                puts_(j, "{}");
            else
                puts_(j, "null");
            j->st = JV_DONE;
            return;
        }
        /* after ':' a value is owed; in an array a pending comma was never written */
        if (j->depth && j->stack[j->depth - 1] == '{')
            puts_(j, "null");
        break;
    case JV_STRING:
    case JV_ESC:
    case JV_UHEX:
    case JV_SURR1:
    case JV_SURR2:
        if (j->hi)
            puts_(j, "\\ufffd");
        puts_(j, "\"");
        if (j->is_key)
            puts_(j, ":null");
        break;
    case JV_NUMBER:
        emit_pending_comma(j);
        if (valid_number(j->tok, j->ntok))
            put_number(j);
        else
            puts_(j, "0");
        break;
    case JV_LITERAL:
        emit_pending_comma(j);
        puts_(j, "null");
        break;
    case JV_COLON:
        puts_(j, ":null");
        break;
    default:
        break;
    }
    while (j->depth > 0) {
        j->depth--;
        puts_(j, j->stack[j->depth] == '{' ? "}" : "]");
    }
    j->st = JV_DONE;
}

static int reject(tc_jv *j)
{
    tc_jv_finish(j);
    return TC_JV_REJECT;
}

static bool is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void put_u(tc_jv *j, unsigned v)
{
    char b[8];
    static const char hx[] = "0123456789abcdef";
    b[0] = '\\';
    b[1] = 'u';
    b[2] = hx[(v >> 12) & 15];
    b[3] = hx[(v >> 8) & 15];
    b[4] = hx[(v >> 4) & 15];
    b[5] = hx[v & 15];
    put(j, b, 6);
}

/* Bytes a UTF-8 lead byte announces (0: not a lead byte), and the range its first continuation allows. */
static int utf8_need(unsigned char c, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        return 1;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0)
            *lo = 0xA0;
        if (c == 0xED)
            *hi = 0x9F;
        return 2;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0)
            *lo = 0x90;
        if (c == 0xF4)
            *hi = 0x8F;
        return 3;
    }
    return 0;
}

/* One raw byte of string text (not '"' or '\'). */
static void string_byte(tc_jv *j, unsigned char c)
{
    if (j->need8) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (j->nu8 == 1)
            utf8_need(j->u8[0], &lo, &hi);
        if (c >= lo && c <= hi) {
            j->u8[j->nu8++] = c;
            if (--j->need8 == 0) {
                put(j, (const char *)j->u8, (size_t)j->nu8);
                j->nu8 = 0;
            }
            return;
        }
        puts_(j, "\\ufffd");
        j->need8 = j->nu8 = 0;
    }
    if (c == 0) {
        /* NUL is valid JSON (\u0000) but many readers refuse it (jansson in keys, C strings): U+FFFD */
        puts_(j, "\\ufffd");
    } else if (c < 0x20) {
        switch (c) {
        case '\n': puts_(j, "\\n"); break;
        case '\t': puts_(j, "\\t"); break;
        case '\r': puts_(j, "\\r"); break;
        default: put_u(j, c); break;
        }
    } else if (c < 0x80) {
        char ch = (char)c;
        put(j, &ch, 1);
    } else {
        unsigned char lo, hi;
        int need = utf8_need(c, &lo, &hi);
        if (!need) {
            puts_(j, "\\ufffd");
            return;
        }
        j->u8[0] = c;
        j->nu8 = 1;
        j->need8 = need;
    }
}

static void end_utf8(tc_jv *j)
{
    if (j->need8) {
        puts_(j, "\\ufffd");
        j->need8 = j->nu8 = 0;
    }
}

static int feed(tc_jv *j, unsigned char c);

static int start_value(tc_jv *j, unsigned char c)
{
    if (j->depth == 0 && !j->started && j->object_only && c != '{')
        return reject(j);
    switch (c) {
    case '{':
    case '[':
        if (j->depth >= TC_JV_MAX_DEPTH)
            return reject(j);
        emit_pending_comma(j);
        j->started = true;
        j->stack[j->depth++] = (char)c;
        put(j, (const char *)&c, 1);
        j->allow_close = true;
        j->st = c == '{' ? JV_KEY : JV_VALUE;
        return TC_JV_MORE;
    case '"':
        emit_pending_comma(j);
        j->started = true;
        j->is_key = false;
        puts_(j, "\"");
        j->st = JV_STRING;
        return TC_JV_MORE;
    case 't':
    case 'f':
    case 'n':
        j->started = true;
        j->ntok = 0;
        j->tok[j->ntok++] = (char)c;
        j->st = JV_LITERAL;
        return TC_JV_MORE;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            j->started = true;
            j->ntok = 0;
            j->tok[j->ntok++] = (char)c;
            j->st = JV_NUMBER;
            return TC_JV_MORE;
        }
        return reject(j);
    }
}

static int close_container(tc_jv *j, unsigned char c)
{
    char want = c == '}' ? '{' : '[';
    if (j->depth == 0 || j->stack[j->depth - 1] != want)
        return reject(j);
    j->depth--;
    j->pend_comma = false;
    put(j, (const char *)&c, 1);
    return value_ended(j);
}

static int feed(tc_jv *j, unsigned char c)
{
    switch (j->st) {
    case JV_DONE:
        return TC_JV_DONE_UNCONSUMED;
    case JV_VALUE:
        if (is_ws(c))
            return TC_JV_MORE;
        if (c == ']' && j->allow_close)
            return close_container(j, c);
        j->allow_close = false;
        return start_value(j, c);
    case JV_KEY:
        if (is_ws(c))
            return TC_JV_MORE;
        if (c == '}' && j->allow_close)
            return close_container(j, c);
        if (c != '"')
            return reject(j);
        j->allow_close = false;
        emit_pending_comma(j);
        j->is_key = true;
        puts_(j, "\"");
        j->st = JV_STRING;
        return TC_JV_MORE;
    case JV_COLON:
        if (is_ws(c))
            return TC_JV_MORE;
        if (c != ':')
            return reject(j);
        puts_(j, ":");
        j->st = JV_VALUE;
        return TC_JV_MORE;
    case JV_AFTER:
        if (is_ws(c))
            return TC_JV_MORE;
        if (c == ',') {
            /* written when the next member starts, so a trailing comma vanishes */
            j->pend_comma = true;
            j->allow_close = true;
            j->st = j->stack[j->depth - 1] == '{' ? JV_KEY : JV_VALUE;
            return TC_JV_MORE;
        }
        if (c == '}' || c == ']')
            return close_container(j, c);
        return reject(j);
    case JV_STRING:
        if (c == '"') {
            end_utf8(j);
            puts_(j, "\"");
            if (j->is_key) {
                j->st = JV_COLON;
                return TC_JV_MORE;
            }
            return value_ended(j);
        }
        if (c == '\\') {
            end_utf8(j);
            j->st = JV_ESC;
            return TC_JV_MORE;
        }
        string_byte(j, c);
        return TC_JV_MORE;
    case JV_ESC:
        if (c == 'u') {
            j->ntok = 0;
            j->st = JV_UHEX;
            return TC_JV_MORE;
        }
        if (c && strchr("\"\\/bfnrt", c)) {
            if (j->hi) {
                puts_(j, "\\ufffd");
                j->hi = 0;
            }
            char e[2] = {'\\', (char)c};
            put(j, e, 2);
            j->st = JV_STRING;
            return TC_JV_MORE;
        }
        return reject(j);
    case JV_UHEX: {
        int h = hexval(c);
        if (h < 0)
            return reject(j);
        j->tok[j->ntok++] = (char)c;
        if (j->ntok < 4)
            return TC_JV_MORE;
        unsigned v = 0;
        for (int i = 0; i < 4; i++)
            v = v * 16 + (unsigned)hexval((unsigned char)j->tok[i]);
        j->ntok = 0;
        if (j->hi) {
            if (v >= 0xDC00 && v <= 0xDFFF) {
                put_u(j, j->hi);
                put_u(j, v);
                j->hi = 0;
                j->st = JV_STRING;
                return TC_JV_MORE;
            }
            puts_(j, "\\ufffd");
            j->hi = 0;
        }
        if (v >= 0xD800 && v <= 0xDBFF) {
            j->hi = v;
            j->st = JV_SURR1;
            return TC_JV_MORE;
        }
        if ((v >= 0xDC00 && v <= 0xDFFF) || v == 0)
            puts_(j, "\\ufffd");
        else
            put_u(j, v);
        j->st = JV_STRING;
        return TC_JV_MORE;
    }
    case JV_SURR1:
        if (c == '\\') {
            j->st = JV_SURR2;
            return TC_JV_MORE;
        }
        puts_(j, "\\ufffd");
        j->hi = 0;
        j->st = JV_STRING;
        return feed(j, c);
    case JV_SURR2:
        if (c == 'u') {
            j->st = JV_UHEX;
            return TC_JV_MORE;
        }
        puts_(j, "\\ufffd");
        j->hi = 0;
        j->st = JV_ESC;
        return feed(j, c);
    case JV_NUMBER:
        if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
            if (j->ntok + 1 >= sizeof j->tok)
                return reject(j);
            j->tok[j->ntok++] = (char)c;
            return TC_JV_MORE;
        }
        if (!valid_number(j->tok, j->ntok))
            return reject(j);
        emit_pending_comma(j);
        put_number(j);
        j->ntok = 0;
        if (value_ended(j) == TC_JV_DONE)
            return TC_JV_DONE_UNCONSUMED;
        return feed(j, c);
    case JV_LITERAL: {
        const char *lit = j->tok[0] == 't' ? "true" : j->tok[0] == 'f' ? "false" : "null";
        if (c != (unsigned char)lit[j->ntok])
            return reject(j);
        j->tok[j->ntok++] = (char)c;
        if (j->ntok < strlen(lit))
            return TC_JV_MORE;
        emit_pending_comma(j);
        puts_(j, lit);
        j->ntok = 0;
        return value_ended(j);
    }
    default:
        return reject(j);
    }
}

int tc_jv_feed(tc_jv *j, unsigned char c) { return feed(j, c); }

int tc_json_escape(sy_buf *out, const char *s, size_t n)
{
    tc_jv j;
    tc_jv_init(&j, false, out);
    j.st = JV_STRING;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            end_utf8(&j);
            char e[2] = {'\\', (char)c};
            put(&j, e, 2);
        } else {
            string_byte(&j, c);
        }
    }
    end_utf8(&j);
    return j.oom ? -1 : 0;
}

size_t tc_utf8_safe_len(const char *s, size_t n)
{
    /* look back over at most 3 continuation bytes for an unfinished lead byte */
    size_t i = n, k = 0;
    while (i > 0 && k < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
        i--;
        k++;
    }
    if (i == 0)
        return n;
    unsigned char c = (unsigned char)s[i - 1];
    unsigned char lo, hi;
    int need = utf8_need(c, &lo, &hi);
    if (need > (int)k)
        return i - 1;
    return n;
}
