/*
 * The INI configuration: parsing with inih, --set overrides, lookups.
 * Key validation against declaration tables lives in config_keys.c.
 *
 * inih as Debian builds it (55): ';' and '#' start a comment line, ';'
 * after whitespace starts an inline comment, ':' works like '=', an
 * indented line continues the previous value, lines hold at most 198
 * characters, and the handler gets no line number. We read the file
 * ourselves and feed inih one line per call through ini_parse_stream, so
 * we know each line's number and text, and can refuse what inih would
 * silently misread: continuation lines (an indented "key = v" would become
 * part of the previous value), over-long lines (inih splits them into
 * several), names longer than inih's 49-character buffers (truncated).
 */
#include "config.h"

#include "plugin/config.h"
#include "plugin/config_internal.h"
#include "util/util.h"

#include <ctype.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* inih's fixed name buffers (MAX_SECTION, MAX_NAME) hold 49 characters. */
#define SY_INI_MAX_NAME 49

static const char *const known_sections[] = {"model", "scheduler", "plugins", "device", "attention", "moe", "comm",
                                              "speculative"};
#define N_KNOWN (sizeof known_sections / sizeof known_sections[0])
#define KNOWN_LIST "[model], [scheduler], [plugins], [device], [attention], [moe], [comm], [speculative], [frontend:NAME]"

typedef struct cfg_node {
    struct cfg_node *next; /* every entry ever made, freed with the config */
    sy_config_entry e;
    char buf[];
} cfg_node;

typedef struct cfg_section {
    char *name;
    const char *file; /* where its first header is, or "--set" */
    int line;
    sy_config_entry **ents;
    size_t n, cap;
} cfg_section;

struct sy_config {
    char *path; /* the file loaded, or NULL */
    cfg_section *secs;
    size_t n_secs, cap_secs;
    const char **names; /* section names, for sy_config_sections */
    cfg_node *nodes;
};

/* ------------------------------------------------------------ sections */

/* The sections of the kinds other than frontend, bare and as messages write them. */
static const struct {
    int kind;
    const char *name, *bracketed;
} kind_sections[] = {
    {SY_KIND_DEVICE, "device", "[device]"},
    {SY_KIND_ATTN, "attention", "[attention]"},
    {SY_KIND_MOE, "moe", "[moe]"},
    {SY_KIND_COMM, "comm", "[comm]"},
};
#define N_KIND_SECTIONS (sizeof kind_sections / sizeof kind_sections[0])

int sy_section_kind(const char *s)
{
    if (!s)
        return 0;
    for (size_t i = 0; i < N_KIND_SECTIONS; i++)
        if (strcmp(s, kind_sections[i].name) == 0)
            return kind_sections[i].kind;
    if (strncmp(s, "frontend:", 9) == 0)
        return SY_KIND_FRONTEND;
    return 0;
}

const char *sy_kind_config_section(int kind)
{
    for (size_t i = 0; i < N_KIND_SECTIONS; i++)
        if (kind_sections[i].kind == kind)
            return kind_sections[i].name;
    return NULL;
}

const char *sy_kind_section(int kind)
{
    for (size_t i = 0; i < N_KIND_SECTIONS; i++)
        if (kind_sections[i].kind == kind)
            return kind_sections[i].bracketed;
    return kind == SY_KIND_FRONTEND ? "[frontend:NAME]" : "[?]";
}

/* 1 if known; else 0 and why says what is wrong with the name. */
static int section_known(const char *name, char *why, size_t cap)
{
    for (size_t i = 0; i < N_KNOWN; i++)
        if (strcmp(name, known_sections[i]) == 0)
            return 1;
    if (strncmp(name, "frontend:", 9) == 0) {
        const char *n = name + 9;
        if (!*n) {
            snprintf(why, cap, "[frontend:] needs a name after the colon, e.g. [frontend:api]");
            return 0;
        }
        for (const char *p = n; *p; p++)
            if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-') {
                snprintf(why, cap, "frontend name \"%s\" may hold only letters, digits, '_' and '-'", n);
                return 0;
            }
        return 1;
    }
    const char *best = NULL;
    int bestd = 3;
    for (size_t i = 0; i < N_KNOWN; i++) {
        int d = sy__edit_distance(name, known_sections[i], 2);
        if (d < bestd) {
            bestd = d;
            best = known_sections[i];
        }
    }
    if (best)
        snprintf(why, cap, "unknown section [%s] (did you mean [%s]?); known sections: " KNOWN_LIST, name, best);
    else
        snprintf(why, cap, "unknown section [%s]; known sections: " KNOWN_LIST, name);
    return 0;
}

static cfg_section *find_section(const sy_config *c, const char *name)
{
    for (size_t i = 0; i < c->n_secs; i++)
        if (strcmp(c->secs[i].name, name) == 0)
            return &c->secs[i];
    return NULL;
}

static cfg_section *add_section(sy_config *c, const char *name, const char *file, int line)
{
    cfg_section *s = find_section(c, name);
    if (s)
        return s;
    if (c->n_secs == c->cap_secs) {
        size_t cap = c->cap_secs ? c->cap_secs * 2 : 8;
        cfg_section *ns = realloc(c->secs, cap * sizeof *ns);
        if (!ns)
            return NULL;
        c->secs = ns;
        const char **nn = realloc(c->names, cap * sizeof *nn);
        if (!nn)
            return NULL;
        c->names = nn;
        c->cap_secs = cap;
    }
    char *n = sy_strdup(name);
    if (!n)
        return NULL;
    s = &c->secs[c->n_secs];
    memset(s, 0, sizeof *s);
    s->name = n;
    s->file = file;
    s->line = line;
    c->names[c->n_secs++] = n;
    return s;
}

/* Makes an entry (strings copied) and puts it in s, replacing one of the same key. */
static sy_config_entry *put_entry(sy_config *c, cfg_section *s, const char *key, const char *value, const char *file,
                                  int line)
{
    size_t kl = strlen(key) + 1, vl = strlen(value) + 1;
    cfg_node *n = malloc(sizeof *n + kl + vl);
    if (!n)
        return NULL;
    memcpy(n->buf, key, kl);
    memcpy(n->buf + kl, value, vl);
    n->e.section = s->name;
    n->e.key = n->buf;
    n->e.value = n->buf + kl;
    n->e.file = file;
    n->e.line = line;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->ents[i]->key, key) == 0) {
            /* The old node stays on c->nodes: pointers handed out stay valid. */
            s->ents[i] = &n->e;
            n->next = c->nodes;
            c->nodes = n;
            return &n->e;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        sy_config_entry **ne = realloc(s->ents, cap * sizeof *ne);
        if (!ne) {
            free(n);
            return NULL;
        }
        s->ents = ne;
        s->cap = cap;
    }
    s->ents[s->n++] = &n->e;
    n->next = c->nodes;
    c->nodes = n;
    return &n->e;
}

/* ------------------------------------------------------------- public */

sy_config *sy_config_new(void)
{
    return calloc(1, sizeof(sy_config));
}

void sy_config_free(sy_config *c)
{
    if (!c)
        return;
    for (cfg_node *n = c->nodes, *next; n; n = next) {
        next = n->next;
        free(n);
    }
    for (size_t i = 0; i < c->n_secs; i++) {
        free(c->secs[i].name);
        free(c->secs[i].ents);
    }
    free(c->secs);
    free(c->names);
    free(c->path);
    free(c);
}

sy_config *sy_config_copy(const sy_config *src)
{
    sy_config *c = sy_config_new();
    if (!c || !src)
        return c;
    /* Entries of the loaded file point at its path: theirs must point at the copy's. */
    if (src->path && !(c->path = sy_strdup(src->path))) {
        sy_config_free(c);
        return NULL;
    }
    for (size_t i = 0; i < src->n_secs; i++) {
        const cfg_section *s = &src->secs[i];
        cfg_section *d = add_section(c, s->name, s->file == src->path ? c->path : s->file, s->line);
        for (size_t j = 0; d && j < s->n; j++) {
            const sy_config_entry *e = s->ents[j];
            if (!put_entry(c, d, e->key, e->value, e->file == src->path ? c->path : e->file, e->line))
                d = NULL;
        }
        if (!d) {
            sy_config_free(c);
            return NULL;
        }
    }
    return c;
}

const char *sy__config_path(const sy_config *c)
{
    return c ? c->path : NULL;
}

const sy_config_entry *sy_config_find(const sy_config *c, const char *section, const char *key)
{
    if (!c || !section || !key)
        return NULL;
    const cfg_section *s = find_section(c, section);
    if (!s)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->ents[i]->key, key) == 0)
            return s->ents[i];
    return NULL;
}

const char *sy_config_get(const sy_config *c, const char *section, const char *key)
{
    const sy_config_entry *e = sy_config_find(c, section, key);
    return e ? e->value : NULL;
}

int sy_config_has_section(const sy_config *c, const char *section)
{
    return c && section && find_section(c, section) != NULL;
}

size_t sy_config_section(const sy_config *c, const char *section, const sy_config_entry *const **out)
{
    const cfg_section *s = c && section ? find_section(c, section) : NULL;
    if (out)
        *out = s ? (const sy_config_entry *const *)s->ents : NULL;
    return s ? s->n : 0;
}

size_t sy_config_sections(const sy_config *c, const char *const **out)
{
    if (out)
        *out = c ? (const char *const *)c->names : NULL;
    return c ? c->n_secs : 0;
}

/* ------------------------------------------------------------- parsing */

typedef struct parse_state {
    sy_config *c;
    const char *file;
    const char *p, *end; /* the rest of the file */
    int lineno;
    int line_bad;  /* the current line has an error already recorded */
    int sect_bad;  /* the current section is unknown */
    int have_prev; /* a key since the last header: inih treats indented lines as continuations */
    int err_line;  /* first error recorded, 0 if none */
    int err_code;
    char err[sizeof(((sy_err *)0)->msg)];
} parse_state;

static void record(parse_state *st, int code, const char *fmt, ...) SY__PRINTF(3, 4);
static void record(parse_state *st, int code, const char *fmt, ...)
{
    st->line_bad = 1;
    if (st->err_line)
        return;
    st->err_line = st->lineno;
    st->err_code = code;
    int n = snprintf(st->err, sizeof st->err, "%s:%d: ", st->file, st->lineno);
    if (n < 0 || (size_t)n >= sizeof st->err)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->err + n, sizeof st->err - (size_t)n, fmt, ap);
    va_end(ap);
}

static int is_space(char ch)
{
    return isspace((unsigned char)ch) != 0;
}

/* inih's find_chars_or_comment: first of chars, or a ';' after whitespace. */
static const char *find_or_comment(const char *s, const char *e, const char *chars)
{
    int was_space = 0;
    while (s < e && !(chars && strchr(chars, *s)) && !(was_space && *s == ';')) {
        was_space = is_space(*s);
        s++;
    }
    return s;
}

/* Shows a line in a message: at most 60 characters, quoted by the caller. */
static int show_len(const char *s, const char *e)
{
    while (e > s && is_space(e[-1]))
        e--;
    return e - s > 60 ? 60 : (int)(e - s);
}

/*
 * Looks at one raw line the way inih will, to record what inih would
 * misread and to see section headers (inih tells the handler only about
 * keys, so an empty section would otherwise go unnoticed).
 */
static void classify(parse_state *st, const char *line, const char *e)
{
    const char *s = line;
    while (s < e && is_space(*s))
        s++;
    const char *re = e;
    while (re > s && is_space(re[-1]))
        re--;
    if (s == re || *s == ';' || *s == '#')
        return;
    if (st->have_prev && s > line) {
        record(st, SY_ERR_INVALID,
               "indented line \"%.*s\": INI continuation lines are not supported (inih would append it to the "
               "previous key's value); remove the indentation",
               show_len(s, re), s);
        return;
    }
    if (*s == '[') {
        const char *close = find_or_comment(s + 1, re, "]");
        if (close >= re || *close != ']') {
            record(st, SY_ERR_INVALID, "expected \"]\" to close the section header \"%.*s\"", show_len(s, re), s);
            return;
        }
        const char *after = close + 1;
        while (after < re && is_space(*after))
            after++;
        if (after < re && *after != ';') {
            record(st, SY_ERR_INVALID, "unexpected text \"%.*s\" after the section header", show_len(after, re),
                   after);
            return;
        }
        st->have_prev = 0;
        st->sect_bad = 1;
        size_t len = (size_t)(close - s - 1);
        char name[SY_INI_MAX_NAME + 1];
        if (len > SY_INI_MAX_NAME) {
            record(st, SY_ERR_INVALID, "section name \"%.*s\" is longer than %d characters", show_len(s + 1, close),
                   s + 1, SY_INI_MAX_NAME);
            return;
        }
        memcpy(name, s + 1, len);
        name[len] = '\0';
        char why[400];
        if (!section_known(name, why, sizeof why)) {
            record(st, SY_ERR_INVALID, "%s", why);
            return;
        }
        if (!add_section(st->c, name, st->file, st->lineno)) {
            record(st, SY_ERR_NOMEM, "out of memory");
            return;
        }
        st->sect_bad = 0;
        return;
    }
    const char *sep = find_or_comment(s, re, "=:");
    if (sep >= re || (*sep != '=' && *sep != ':')) {
        record(st, SY_ERR_INVALID, "expected \"key = value\", a [section] header or a ; comment, found \"%.*s\"",
               show_len(s, re), s);
        return;
    }
    st->have_prev = 1;
    const char *ne = sep;
    while (ne > s && is_space(ne[-1]))
        ne--;
    if (ne == s)
        record(st, SY_ERR_INVALID, "missing key name before \"%c\"", *sep);
    else if (ne - s > SY_INI_MAX_NAME)
        record(st, SY_ERR_INVALID, "key name \"%.*s\" is longer than %d characters", show_len(s, ne), s,
               SY_INI_MAX_NAME);
}

/* inih's reader: hands over exactly one line per call, so inih's line count is ours. */
static char *reader(char *str, int num, void *stream)
{
    parse_state *st = stream;
    if (st->p >= st->end)
        return NULL;
    const char *line = st->p;
    const char *nl = memchr(line, '\n', (size_t)(st->end - line));
    const char *e = nl ? nl : st->end;
    st->p = nl ? nl + 1 : st->end;
    st->lineno++;
    st->line_bad = 0;
    if (st->lineno == 1 && e - line >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0)
        line += 3; /* UTF-8 byte order mark */
    size_t len = (size_t)(e - line);
    if (num < 3 || len + 2 > (size_t)num) {
        /* inih would read it in pieces and parse each piece as a line. */
        record(st, SY_ERR_INVALID, "line is %zu characters long; the INI parser (inih) accepts at most %d", len,
               num - 2);
        str[0] = '\n';
        str[1] = '\0';
        return str;
    }
    classify(st, line, e);
    memcpy(str, line, len);
    str[len] = '\n';
    str[len + 1] = '\0';
    return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    parse_state *st = user;
    if (st->line_bad)
        return 0;
    if (!*section) {
        record(st, SY_ERR_INVALID, "key \"%s\" is outside any section; put it under one of " KNOWN_LIST, name);
        return 0;
    }
    if (st->sect_bad)
        return 0;
    cfg_section *s = find_section(st->c, section);
    if (!s) {
        record(st, SY_ERR_INTERNAL, "section [%s] was not seen (parser out of step)", section);
        return 0;
    }
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->ents[i]->key, name) == 0) {
            record(st, SY_ERR_INVALID, "duplicate key \"%s\" in [%s] (already set at %s:%d)", name, section,
                   s->ents[i]->file, s->ents[i]->line);
            return 0;
        }
    /* `plugin = sub/x.so` means next to this INI file, wherever switchyard
     * runs from; the working directory must never decide which code loads. */
    char joined[4096];
    const char *slash = strrchr(st->file, '/');
    if (strcmp(name, "plugin") == 0 && strcmp(section, "plugins") != 0 && strchr(value, '/') && value[0] != '/' &&
        slash) {
        int n = snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - st->file), st->file, value);
        if (n < 0 || (size_t)n >= sizeof joined) {
            record(st, SY_ERR_INVALID, "plugin path \"%.100s...\" is too long", value);
            return 0;
        }
        value = joined;
    }
    if (!put_entry(st->c, s, name, value, st->file, st->lineno)) {
        record(st, SY_ERR_NOMEM, "out of memory");
        return 0;
    }
    return 1;
}

/* Text of line n of buf, for a syntax error only inih noticed. */
static void line_text(const char *buf, size_t len, int n, const char **s, int *l)
{
    const char *p = buf, *end = buf + len;
    for (int i = 1; i < n && p < end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *s = p;
    *l = show_len(p, nl ? nl : end);
}

int sy_config_load(const char *path, sy_config **out, sy_err *err)
{
    if (!out)
        return sy_err_set(err, SY_ERR_INVALID, "sy_config_load: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return sy_err_set(err, SY_ERR_INVALID, "no configuration file given");
    char *buf = NULL;
    size_t len = 0;
    int rc = sy_read_file(path, &buf, &len, err);
    if (rc)
        return rc;
    sy_config *c = sy_config_new();
    if (!c || !(c->path = sy_strdup(path))) {
        free(buf);
        sy_config_free(c);
        return sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory", path);
    }
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *p = buf; p < nul; p++)
            line += *p == '\n';
        free(buf);
        sy_config_free(c);
        return sy_err_set(err, SY_ERR_INVALID, "%s:%d: contains a NUL byte: not a text file", path, line);
    }
    parse_state st = {.c = c, .file = c->path, .p = buf, .end = buf + len};
    int r = ini_parse_stream(reader, &st, handler, &st);
    if (r == -2 || (st.err_line && st.err_code == SY_ERR_NOMEM)) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "%s: out of memory while parsing", path);
    } else if (st.err_line && (r <= 0 || st.err_line <= r)) {
        rc = sy_err_set(err, st.err_code, "%s", st.err);
    } else if (r > 0) {
        const char *s;
        int l;
        line_text(buf, len, r, &s, &l);
        rc = sy_err_set(err, SY_ERR_INVALID, "%s:%d: cannot parse \"%.*s\"", path, r, l, s);
    } else if (r != 0) {
        rc = sy_err_set(err, SY_ERR_IO, "%s: the INI parser failed (%d)", path, r);
    }
    free(buf);
    if (rc) {
        sy_config_free(c);
        return rc;
    }
    *out = c;
    return SY_OK;
}

/* ---------------------------------------------------------------- --set */

static void trim(const char **s, const char **e)
{
    while (*s < *e && is_space(**s))
        (*s)++;
    while (*e > *s && is_space((*e)[-1]))
        (*e)--;
}

/* Applies one "section.key=value"; the entry remembers origin ("--set" or SY_CONFIG_ENV) as its file. */
static int set_from(sy_config *c, const char *a, const char *origin, sy_err *err)
{
    if (!c || !a)
        return sy_err_set(err, SY_ERR_INVALID, "sy_config_set: no config or no assignment");
    const char *eq = strchr(a, '=');
    if (!eq)
        return sy_err_set(err, SY_ERR_INVALID,
                          "expected section.key=value (e.g. scheduler.max_running=64), found no \"=\" in \"%s\"", a);
    const char *ls = a, *le = eq;
    trim(&ls, &le);
    const char *dot = memchr(ls, '.', (size_t)(le - ls));
    if (!dot)
        return sy_err_set(err, SY_ERR_INVALID,
                          "expected section.key=value (e.g. scheduler.max_running=64), found no \".\" in \"%.*s\"",
                          (int)(le - ls), ls);
    const char *ss = ls, *se = dot, *ks = dot + 1, *ke = le;
    trim(&ss, &se);
    trim(&ks, &ke);
    if (ss == se || ks == ke)
        return sy_err_set(err, SY_ERR_INVALID,
                          "expected section.key=value (e.g. scheduler.max_running=64), found an empty %s in \"%.*s\"",
                          ss == se ? "section" : "key", (int)(le - ls), ls);
    if (se - ss > SY_INI_MAX_NAME || ke - ks > SY_INI_MAX_NAME)
        return sy_err_set(err, SY_ERR_INVALID, "section and key names hold at most %d characters", SY_INI_MAX_NAME);
    char sect[SY_INI_MAX_NAME + 1], key[SY_INI_MAX_NAME + 1];
    memcpy(sect, ss, (size_t)(se - ss));
    sect[se - ss] = '\0';
    memcpy(key, ks, (size_t)(ke - ks));
    key[ke - ks] = '\0';
    for (const char *p = key; *p; p++)
        if (is_space(*p) || *p == '[' || *p == ']' || *p == ';' || *p == ':')
            return sy_err_set(err, SY_ERR_INVALID, "key \"%s\" holds '%c'; keys are names such as max_running", key,
                              *p);
    char why[400];
    if (!section_known(sect, why, sizeof why))
        return sy_err_set(err, SY_ERR_INVALID, "%s", why);
    const char *vs = eq + 1, *ve = eq + strlen(eq);
    trim(&vs, &ve);
    char *value = malloc((size_t)(ve - vs) + 1);
    if (!value)
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    memcpy(value, vs, (size_t)(ve - vs));
    value[ve - vs] = '\0';
    cfg_section *s = add_section(c, sect, origin, 0);
    const sy_config_entry *e = s ? put_entry(c, s, key, value, origin, 0) : NULL;
    free(value);
    return e ? SY_OK : sy_err_set(err, SY_ERR_NOMEM, "out of memory");
}

int sy_config_set(sy_config *c, const char *a, sy_err *err)
{
    return set_from(c, a, "--set", err);
}

int sy_config_set_all(sy_config *c, const char *const *sets, size_t n, sy_err *err)
{
    for (size_t i = 0; i < n; i++) {
        sy_err why = {{0}};
        int rc = sy_config_set(c, sets[i], &why);
        if (rc)
            return sy_err_set(err, rc, "--set %s: %s", sets[i], why.msg);
    }
    return SY_OK;
}

int sy_config_apply_overrides(sy_config *c, const char *const *sets, size_t n, sy_err *err)
{
    int rc = sy_config_apply_env(c, err);
    return rc ? rc : sy_config_set_all(c, sets, n, err);
}

int sy_config_entry_from_env(const sy_config_entry *e)
{
    return e && e->line == 0 && e->file && strcmp(e->file, SY_CONFIG_ENV) == 0;
}

int sy_config_apply_env(sy_config *c, sy_err *err)
{
    const char *env = getenv(SY_CONFIG_ENV);
    if (!c)
        return sy_err_set(err, SY_ERR_INVALID, "sy_config_apply_env: no config");
    /* Assignments are separated by white space: the values it is for (f32, sizes, names) hold none. */
    int nth = 0;
    for (const char *p = env ? env : ""; *p;) {
        while (*p && is_space(*p))
            p++;
        const char *start = p;
        while (*p && !is_space(*p))
            p++;
        if (p == start)
            break;
        char *a = malloc((size_t)(p - start) + 1);
        if (!a)
            return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
        memcpy(a, start, (size_t)(p - start));
        a[p - start] = '\0';
        nth++;
        sy_err why = {{0}};
        int rc = set_from(c, a, SY_CONFIG_ENV, &why);
        if (rc) {
            /* The entry and the reason first: the whole variable, last, may be long enough to be cut. */
            sy_err_set(err, rc, "%s entry %d, \"%s\": %s (%s=\"%s\")", SY_CONFIG_ENV, nth, a, why.msg, SY_CONFIG_ENV,
                       env);
            free(a);
            return rc;
        }
        free(a);
    }
    return SY_OK;
}
