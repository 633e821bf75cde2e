/* Internals of the chat-template engine: tokens, AST, values, shared helpers. */
#ifndef SY_CHAT_INTERNAL_H
#define SY_CHAT_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

#include "chat/chat_template.h"

#define SY_CT_MAX_DEPTH 200               /* parser nesting and evaluator recursion */
#define SY_CT_MAX_OUTPUT (64u << 20)      /* rendered bytes */
#define SY_CT_MAX_STEPS 50000000LL        /* loop iterations per render */
#define SY_CT_MAX_LIST 1000000u           /* items in a list built by + or * */

/* ---- arena: every compile-time allocation, freed at once ---- */
typedef struct sy_ct_arena {
    void *head;
} sy_ct_arena;
void *sy_ct_alloc(sy_ct_arena *a, size_t n);
char *sy_ct_strndup(sy_ct_arena *a, const char *s, size_t n);
void sy_ct_arena_free(sy_ct_arena *a);

/* ---- growable byte buffer ---- */
typedef struct sy_ct_buf {
    char *p;
    size_t n, cap;
    size_t limit; /* 0: SY_CT_MAX_OUTPUT */
} sy_ct_buf;
int sy_ct_buf_add(sy_ct_buf *b, const char *s, size_t n);
int sy_ct_buf_str(sy_ct_buf *b, const char *s);
void sy_ct_buf_free(sy_ct_buf *b);

/* ---- tokens ---- */
enum {
    TK_EOF, TK_TEXT, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP
};
typedef struct sy_ct_tok {
    int type;
    int line, col;
    const char *s; /* TEXT/STRING (unescaped, arena)/NAME/OP text */
    size_t n;
    long long ival;
    double fval;
} sy_ct_tok;
int sy_ct_lex(sy_ct_arena *a, const char *src, size_t len, sy_ct_tok **toks, size_t *ntoks,
              sy_err *err);

/* ---- AST ---- */
enum {
    /* statements */
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_BREAK, N_CONTINUE,
    /* expressions */
    E_STR, E_INT, E_FLOAT, E_BOOL, E_NONE, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL,
    E_FILTER, E_TEST, E_NEG, E_POS, E_NOT, E_AND, E_OR, E_BIN, E_CMP, E_CONCAT, E_COND,
    E_LIST, E_DICT
};
/* binary / compare operators (E_BIN, E_CMP) */
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

typedef struct sy_node sy_node;
typedef struct sy_nodelist {
    sy_node **v;
    size_t n, cap;
} sy_nodelist;

struct sy_node {
    int kind;
    int line, col;
    int op;              /* E_BIN/E_CMP operator; E_TEST negated; E_BOOL value */
    const char *name;    /* E_NAME/E_ATTR/E_FILTER/E_TEST/N_MACRO/N_SET(attr) name */
    const char *str;     /* N_TEXT, E_STR */
    size_t slen;
    long long ival;
    double fval;
    sy_node *a, *b, *c;  /* operands; N_IF cond; N_FOR iter (a), filter (b); N_SET value */
    sy_nodelist args;    /* call/filter/test args, list items, dict keys, E_CMP operands,
                            E_CONCAT parts, macro defaults (NULL = none) */
    sy_nodelist kwvals;  /* keyword values; dict values */
    const char **knames; /* keyword names / macro parameter names / for & set targets */
    size_t nknames, capknames;
    sy_nodelist body, orelse;
};

int sy_ct_list_push(sy_ct_arena *a, sy_nodelist *l, sy_node *n);

struct sy_chat_template {
    sy_ct_arena arena;
    sy_nodelist body;
};

int sy_ct_parse(sy_chat_template *t, const sy_ct_tok *toks, size_t ntoks, sy_err *err);

/* ---- runtime values ---- */
typedef enum { SV_UNDEF, SV_JSON, SV_NS, SV_MACRO, SV_FUNC, SV_METHOD } sy_vkind;
typedef struct sy_val {
    sy_vkind k;
    json_t *j;           /* owned reference (JSON, NS object, METHOD receiver) */
    const sy_node *m;    /* macro */
    const char *name;    /* undefined's name, builtin or method name */
    const char *owner;   /* undefined from a missing attribute: the owner's type */
} sy_val;

typedef struct sy_scope sy_scope;

typedef struct sy_ct_ctx {
    const sy_chat_template *t;
    sy_scope *root;
    sy_scope *scope; /* current */
    sy_err *err;
    int64_t now_unix; /* strftime_now's clock */
    int failed;
    int depth;
    long long steps;
    sy_ct_arena names; /* names of undefined values, alive for the render */
} sy_ct_ctx;

/* value helpers (chat_value.c) */
sy_val sy_v_undef(const char *name);
sy_val sy_v_json(json_t *j); /* steals j; NULL (out of memory) gives undefined */
sy_val sy_v_str(const char *s, size_t n);
sy_val sy_v_int(long long i);
sy_val sy_v_bool(int b);
sy_val sy_v_none(void);
sy_val sy_v_copy(sy_val v);
void sy_v_free(sy_val *v);
int sy_v_truthy(sy_val v);
int sy_v_is_str(sy_val v);
int sy_v_is_num(sy_val v);
double sy_v_num(sy_val v);
const char *sy_v_typename(sy_val v);
/* Python str(): appended to b. 0 or -1 (size). */
int sy_v_tostr(sy_val v, sy_ct_buf *b);
/* Python repr() */
int sy_v_repr(sy_val v, sy_ct_buf *b);
int sy_v_equal(sy_val a, sy_val b);
/* json.dumps(ensure_ascii=False); indent < 0: none. -1 if not serialisable. */
int sy_json_dump(const json_t *j, int indent, sy_ct_buf *b, int level);
/* A plain JSON value for storing into containers (new reference). */
json_t *sy_v_to_json(sy_val v);
/* UTF-8 code point count and byte offset of code point i */
size_t sy_utf8_len(const char *s, size_t n);
size_t sy_utf8_off(const char *s, size_t n, size_t i);

/* evaluator (chat_eval.c) */
int sy_ct_fail(sy_ct_ctx *c, const sy_node *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
sy_val sy_ct_eval(sy_ct_ctx *c, const sy_node *e);
sy_val sy_ct_getattr(sy_ct_ctx *c, const sy_node *at, sy_val obj, const char *name);
sy_val sy_ct_getitem(sy_ct_ctx *c, const sy_node *at, sy_val obj, sy_val key);
/* Materialises an iterable into a new JSON array (strings: characters,
 * objects: keys, undefined: empty). NULL on error (reported). */
json_t *sy_ct_iter_list(sy_ct_ctx *c, const sy_node *at, sy_val v);
sy_val sy_ct_call_macro(sy_ct_ctx *c, const sy_node *at, const sy_node *m, sy_val *args,
                        size_t nargs, const char **knames, sy_val *kvals, size_t nk);

/* filters, tests, methods, builtins (chat_filters.c). Arguments are borrowed. */
sy_val sy_ct_filter(sy_ct_ctx *c, const sy_node *at, const char *name, sy_val v, sy_val *args,
                    size_t nargs, const char **knames, sy_val *kvals, size_t nk);
/* 1/0, or -1 on error (reported) */
int sy_ct_test(sy_ct_ctx *c, const sy_node *at, const char *name, sy_val v, sy_val *args,
               size_t nargs);
/* The method's static name if recv has a method called name, else NULL. */
const char *sy_ct_is_method(const json_t *recv, const char *name);
sy_val sy_ct_call_method(sy_ct_ctx *c, const sy_node *at, sy_val recv, const char *name,
                         sy_val *args, size_t nargs, const char **knames, sy_val *kvals,
                         size_t nk);
int sy_ct_is_builtin(const char *name);
sy_val sy_ct_call_builtin(sy_ct_ctx *c, const sy_node *at, const char *name, sy_val *args,
                          size_t nargs, const char **knames, sy_val *kvals, size_t nk);

#endif
