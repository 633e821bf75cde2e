/* Chat templates: source -> tokens, with jinja2's whitespace control
 * (trim_blocks, lstrip_blocks, "-" and "+" modifiers) and Python string
 * literal unescaping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_internal.h"
#include "util/utf8.h"

typedef struct lexer {
    sy_ct_arena *a;
    const char *src;
    size_t len, pos;
    sy_ct_tok *toks;
    size_t n, cap;
    sy_err *err;
    size_t lc_pos; /* incremental line/column cache */
    int lc_line, lc_col;
} lexer;

static void line_col(const char *src, size_t pos, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < pos; i++) {
        if (src[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)src[i] & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static int lex_fail(lexer *L, size_t pos, const char *what)
{
    int line, col;
    line_col(L->src, pos, &line, &col);
    return sy_err_set(L->err, SY_ERR_INVALID, "template syntax error at %d:%d: %s", line, col, what);
}

static sy_ct_tok *push(lexer *L, int type, size_t pos, const char *s, size_t n)
{
    if (L->n == L->cap) {
        size_t nc = L->cap ? L->cap * 2 : 256;
        sy_ct_tok *nt = sy_ct_alloc(L->a, nc * sizeof *nt);
        if (!nt)
            return NULL;
        if (L->n)
            memcpy(nt, L->toks, L->n * sizeof *nt);
        L->toks = nt;
        L->cap = nc;
    }
    sy_ct_tok *t = &L->toks[L->n++];
    memset(t, 0, sizeof *t);
    t->type = type;
    if (pos < L->lc_pos || L->lc_line == 0) {
        L->lc_pos = 0;
        L->lc_line = 1;
        L->lc_col = 1;
    }
    for (size_t i = L->lc_pos; i < pos; i++) {
        if (L->src[i] == '\n') {
            L->lc_line++;
            L->lc_col = 1;
        } else if (((unsigned char)L->src[i] & 0xC0) != 0x80) {
            L->lc_col++;
        }
    }
    L->lc_pos = pos;
    t->line = L->lc_line;
    t->col = L->lc_col;
    t->s = s;
    t->n = n;
    return t;
}

static int is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* Python "unicode-escape" decoding of a literal body. */
static int unescape(lexer *L, size_t at, const char *s, size_t n, const char **out, size_t *outn)
{
    char *o = sy_ct_alloc(L->a, n + 1);
    size_t k = 0;
    if (!o)
        return sy_err_set(L->err, SY_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            o[k++] = s[i];
            continue;
        }
        char e = s[++i];
        int digits = 0;
        switch (e) {
        case '\n': break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'v': o[k++] = '\v'; break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                unsigned v = 0;
                int c = 0;
                while (c < 3 && i < n && s[i] >= '0' && s[i] <= '7') {
                    v = v * 8 + (unsigned)(s[i] - '0');
                    i++;
                    c++;
                }
                i--;
                k += sy_utf8_encode(v, o + k);
            } else {
                o[k++] = '\\';
                o[k++] = e;
            }
        }
        if (digits) {
            unsigned long cp = 0;
            if (i + (size_t)digits >= n)
                return lex_fail(L, at, "truncated \\x/\\u escape in string literal");
            for (int d = 1; d <= digits; d++) {
                int h = sy_hex_digit(s[i + (size_t)d]);
                if (h < 0)
                    return lex_fail(L, at, "bad \\x/\\u escape in string literal");
                cp = cp * 16 + (unsigned long)h;
            }
            if (cp > 0x10FFFF)
                return lex_fail(L, at, "escape beyond U+10FFFF in string literal");
            i += (size_t)digits;
            k += sy_utf8_encode((uint32_t)cp, o + k); /* at most digits+2 bytes: fits */
        }
    }
    o[k] = 0;
    *out = o;
    *outn = k;
    return 0;
}

static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">=", NULL};

/* Lexes the inside of {{ }} / {% %} up to its end marker. */
static int lex_tag(lexer *L, int block, int *strip_after, int *keep_nl)
{
    int depth = 0;
    const char *s = L->src;
    for (;;) {
        while (L->pos < L->len && is_ws(s[L->pos]))
            L->pos++;
        size_t p = L->pos;
        if (p >= L->len)
            return lex_fail(L, p, block ? "unexpected end of template, expected '%}'"
                                        : "unexpected end of template, expected '}}'");
        const char *end = block ? "%}" : "}}";
        if (depth == 0) {
            int mod = (s[p] == '-' || (block && s[p] == '+')) ? 1 : 0;
            if (p + (size_t)mod + 2 <= L->len && memcmp(s + p + mod, end, 2) == 0) {
                *strip_after = mod && s[p] == '-';
                *keep_nl = mod && s[p] == '+';
                if (!push(L, block ? TK_BLOCK_END : TK_VAR_END, p, s + p, (size_t)mod + 2))
                    return sy_err_set(L->err, SY_ERR_NOMEM, "out of memory");
                L->pos = p + (size_t)mod + 2;
                return 0;
            }
        }
        char ch = s[p];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
            size_t q = p;
            while (q < L->len && ((s[q] >= 'a' && s[q] <= 'z') || (s[q] >= 'A' && s[q] <= 'Z') ||
                                  (s[q] >= '0' && s[q] <= '9') || s[q] == '_'))
                q++;
            if (!push(L, TK_NAME, p, s + p, q - p))
                return sy_err_set(L->err, SY_ERR_NOMEM, "out of memory");
            L->pos = q;
        } else if (ch >= '0' && ch <= '9') {
            char num[128];
            size_t k = 0, q = p;
            int isf = 0;
            while (q < L->len && ((s[q] >= '0' && s[q] <= '9') || s[q] == '_')) {
                if (s[q] != '_' && k < sizeof num - 1)
                    num[k++] = s[q];
                q++;
            }
            int after_dot = p > 0 && s[p - 1] == '.';
            if (!after_dot && q + 1 < L->len && s[q] == '.' && s[q + 1] >= '0' && s[q + 1] <= '9') {
                isf = 1;
                if (k < sizeof num - 1) /* 127 digits before the dot wrote num[128] */
                    num[k++] = s[q];
                q++;
                while (q < L->len && ((s[q] >= '0' && s[q] <= '9') || s[q] == '_')) {
                    if (s[q] != '_' && k < sizeof num - 1)
                        num[k++] = s[q];
                    q++;
                }
            }
            if (!after_dot && q < L->len && (s[q] == 'e' || s[q] == 'E')) {
                size_t r = q + 1;
                if (r < L->len && (s[r] == '+' || s[r] == '-'))
                    r++;
                if (r < L->len && s[r] >= '0' && s[r] <= '9') {
                    isf = 1;
                    while (q < r && k < sizeof num - 1)
                        num[k++] = s[q++];
                    while (q < L->len && s[q] >= '0' && s[q] <= '9') {
                        if (k < sizeof num - 1)
                            num[k++] = s[q];
                        q++;
                    }
                }
            }
            if (k == sizeof num - 1) /* digits were dropped: the value would be wrong */
                return lex_fail(L, p, "expected a number literal of at most 126 characters, found a longer one");
            num[k] = 0;
            sy_ct_tok *t = push(L, isf ? TK_FLOAT : TK_INT, p, s + p, q - p);
            if (!t)
                return sy_err_set(L->err, SY_ERR_NOMEM, "out of memory");
            if (isf)
                t->fval = strtod(num, NULL);
            else
                t->ival = strtoll(num, NULL, 10);
            L->pos = q;
        } else if (ch == '\'' || ch == '"') {
            size_t q = p + 1;
            while (q < L->len && s[q] != ch) {
                if (s[q] == '\\')
                    q++;
                q++;
            }
            if (q >= L->len)
                return lex_fail(L, p, "unterminated string literal");
            const char *u = NULL;
            size_t un = 0;
            int rc = unescape(L, p, s + p + 1, q - p - 1, &u, &un);
            if (rc)
                return rc;
            if (!push(L, TK_STRING, p, u, un))
                return sy_err_set(L->err, SY_ERR_NOMEM, "out of memory");
            L->pos = q + 1;
        } else {
            size_t oplen = 0;
            for (int i = 0; ops2[i]; i++)
                if (p + 1 < L->len && memcmp(s + p, ops2[i], 2) == 0)
                    oplen = 2;
            if (!oplen && ch && strchr("+-*/%~()[]{},.:|=<>", ch))
                oplen = 1;
            if (!oplen) {
                char msg[96];
                snprintf(msg, sizeof msg, "unexpected character '%c' inside %s", ch,
                         block ? "{% %}" : "{{ }}");
                return lex_fail(L, p, msg);
            }
            if (oplen == 1 && (ch == '(' || ch == '[' || ch == '{'))
                depth++;
            if (oplen == 1 && (ch == ')' || ch == ']' || ch == '}')) {
                if (depth == 0)
                    return lex_fail(L, p, "unbalanced closing bracket");
                depth--;
            }
            if (!push(L, TK_OP, p, s + p, oplen))
                return sy_err_set(L->err, SY_ERR_NOMEM, "out of memory");
            L->pos = p + oplen;
        }
    }
}

/* "{%[-+]? raw [-]%}" starting after the opener: sets *end past "%}". */
static int raw_begin(const char *s, size_t len, size_t i, size_t *end, int *strip)
{
    while (i < len && is_ws(s[i]))
        i++;
    if (i + 3 > len || memcmp(s + i, "raw", 3) != 0)
        return 0;
    i += 3;
    if (i < len && !is_ws(s[i]) && s[i] != '-' && s[i] != '%')
        return 0;
    while (i < len && is_ws(s[i]))
        i++;
    *strip = 0;
    if (i < len && s[i] == '-') {
        *strip = 1;
        i++;
    }
    if (i + 2 > len || memcmp(s + i, "%}", 2) != 0)
        return 0;
    *end = i + 2;
    return 1;
}

/* "{%[-+]? endraw [-+]?%}" at q: sets *end past it (with the trim_blocks newline). */
static int raw_end(const char *s, size_t len, size_t q, size_t *end, int *strip, int *keep)
{
    size_t i = q + 2;
    if (i < len && (s[i] == '-' || s[i] == '+'))
        i++;
    while (i < len && is_ws(s[i]))
        i++;
    if (i + 6 > len || memcmp(s + i, "endraw", 6) != 0)
        return 0;
    i += 6;
    while (i < len && is_ws(s[i]))
        i++;
    *strip = *keep = 0;
    if (i < len && (s[i] == '-' || s[i] == '+')) {
        *strip = s[i] == '-';
        *keep = s[i] == '+';
        i++;
    }
    if (i + 2 > len || memcmp(s + i, "%}", 2) != 0)
        return 0;
    *end = i + 2;
    return 1;
}

int sy_ct_lex(sy_ct_arena *a, const char *src, size_t len, sy_ct_tok **toks, size_t *ntoks,
              sy_err *err)
{
    lexer L = {.a = a, .src = src, .len = len, .err = err};
    int line_starting = 1;
    while (L.pos < len) {
        /* find the next tag opener */
        size_t p = L.pos;
        int kind = 0; /* '{', '%', '#' */
        while (p + 1 < len) {
            if (src[p] == '{' && (src[p + 1] == '{' || src[p + 1] == '%' || src[p + 1] == '#')) {
                kind = src[p + 1];
                break;
            }
            p++;
        }
        if (!kind)
            p = len;
        size_t tstart = L.pos, tend = p;
        char mod = (kind && p + 2 < len) ? src[p + 2] : 0;
        if (kind && mod == '-') {
            while (tend > tstart && is_ws(src[tend - 1]))
                tend--;
        } else if (kind && mod != '+' && kind != '{') {
            size_t lpos = tend;
            while (lpos > tstart && src[lpos - 1] != '\n')
                lpos--;
            int ws_only = lpos < tend;
            for (size_t i = lpos; i < tend; i++)
                if (!is_ws(src[i]))
                    ws_only = 0;
            if ((lpos > tstart || line_starting) && ws_only)
                tend = lpos;
        }
        if (tend > tstart && !push(&L, TK_TEXT, tstart, src + tstart, tend - tstart))
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
        if (!kind)
            break;
        size_t after_open = p + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
        int strip_after = 0, keep_nl = 0;
        if (kind == '%' && raw_begin(src, len, after_open, &L.pos, &strip_after)) {
            /* {% raw %}...{% endraw %}: the body is text */
            size_t q = L.pos, bstart, bend;
            if (strip_after)
                while (q < len && is_ws(src[q]))
                    q++;
            bstart = q;
            for (;;) {
                while (q + 1 < len && !(src[q] == '{' && src[q + 1] == '%'))
                    q++;
                if (q + 1 >= len)
                    return lex_fail(&L, p, "unclosed raw block, expected '{% endraw %}'");
                size_t endpos;
                int st = 0;
                if (raw_end(src, len, q, &endpos, &st, &keep_nl))
                    break;
                q += 2;
            }
            bend = q;
            char emod = src[q + 2];
            if (emod == '-') {
                while (bend > bstart && is_ws(src[bend - 1]))
                    bend--;
            } else if (emod != '+') {
                size_t lpos = bend;
                while (lpos > bstart && src[lpos - 1] != '\n')
                    lpos--;
                int ws_only = lpos < bend;
                for (size_t i = lpos; i < bend; i++)
                    if (!is_ws(src[i]))
                        ws_only = 0;
                if ((lpos > bstart || lpos > 0) && ws_only)
                    bend = lpos;
            }
            if (bend > bstart && !push(&L, TK_TEXT, bstart, src + bstart, bend - bstart))
                return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
            raw_end(src, len, q, &L.pos, &strip_after, &keep_nl);
        } else if (kind == '#') {
            size_t q = after_open;
            while (q + 1 < len && !(src[q] == '#' && src[q + 1] == '}'))
                q++;
            if (q + 1 >= len)
                return lex_fail(&L, p, "unclosed comment, expected '#}'");
            strip_after = q > after_open && src[q - 1] == '-';
            keep_nl = q > after_open && src[q - 1] == '+';
            L.pos = q + 2;
        } else {
            if (!push(&L, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, p, src + p, after_open - p))
                return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
            L.pos = after_open;
            int rc = lex_tag(&L, kind == '%', &strip_after, &keep_nl);
            if (rc)
                return rc;
        }
        line_starting = 0;
        if (strip_after) {
            while (L.pos < len && is_ws(src[L.pos]))
                L.pos++;
            line_starting = L.pos > 0 && src[L.pos - 1] == '\n';
        } else if (kind != '{' && !keep_nl && L.pos < len && src[L.pos] == '\n') {
            L.pos++;
            line_starting = 1;
        }
    }
    if (!push(&L, TK_EOF, len, src + len, 0))
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    *toks = L.toks;
    *ntoks = L.n;
    return 0;
}
