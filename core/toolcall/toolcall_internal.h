/*
 * Internals of core/toolcall shared by its files: the family table, the
 * parsed tools, and the streaming JSON normaliser the JSON-argument
 * families run the model's argument text through.
 */
#ifndef SY_TOOLCALL_INTERNAL_H
#define SY_TOOLCALL_INTERNAL_H

#include <jansson.h>

#include "toolcall/toolcall.h"

typedef enum tc_kind {
    TC_GLM45,
    TC_GLM47,
    TC_DEEPSEEK_V3,
    TC_DEEPSEEK_V31,
    TC_DEEPSEEK_V32,
    TC_HERMES,
    TC_LLAMA3_JSON,
    TC_MISTRAL,
    TC_KIMI_K2,
    TC_HARMONY
} tc_kind;

struct sy_tool_family {
    tc_kind kind;
    const char *name;
    const char *const *markers; /* special-token texts, NULL-terminated */
};

typedef struct tc_tool {
    char *name;
    char *params;     /* compact JSON text */
    json_t *schema;   /* parsed parameters (a reference), or NULL */
} tc_tool;

struct sy_tools {
    tc_tool *v;
    size_t n;
};

/* How a GLM / DSML raw value is typed. */
typedef enum tc_vtype {
    TC_V_STRING, /* the raw text as a JSON string */
    TC_V_JSON,   /* JSON parsed from the raw text, else the string */
    TC_V_ANY     /* no declared type: same as TC_V_JSON */
} tc_vtype;

/* The declared type of parameter key of tool (by name; unknown tool or key: TC_V_ANY). */
tc_vtype tc_tools_param_type(const sy_tools *t, const char *tool, const char *key);
bool tc_is_marker(const sy_tool_family *f, const char *s, size_t n);

/* ---------------------------------------------------------- JSON normaliser
 * Fed one byte at a time, it writes a compact, valid JSON rendering of
 * the value as far as it has been read, so pieces can be streamed and
 * their concatenation is JSON whatever the model wrote: control bytes in
 * strings are escaped, invalid UTF-8 and lone surrogates become U+FFFD,
 * trailing commas are dropped, and a value that breaks off (a byte that
 * cannot continue it, or tc_jv_finish) is closed up. */

enum { TC_JV_MORE, TC_JV_DONE, TC_JV_DONE_UNCONSUMED, TC_JV_REJECT };

#define TC_JV_MAX_DEPTH 64

typedef struct tc_jv {
    int st;
    bool object_only, started, is_key, allow_close, pend_comma, in_number_top;
    char stack[TC_JV_MAX_DEPTH];
    int depth;
    char tok[72]; /* number or literal being read, or \u digits */
    size_t ntok;
    unsigned hi;  /* high surrogate waiting for its pair */
    unsigned char u8[4];
    int nu8, need8;
    sy_buf *out;
    bool oom;
} tc_jv;

void tc_jv_init(tc_jv *j, bool object_only, sy_buf *out);
int tc_jv_feed(tc_jv *j, unsigned char c);
/* Closes up what is open (an object_only value never started becomes "{}"). */
void tc_jv_finish(tc_jv *j);
bool tc_jv_in_string(const tc_jv *j);
bool tc_jv_done(const tc_jv *j);

/* Appends s as the inside of a JSON string (no quotes); invalid UTF-8 -> U+FFFD. -1 on OOM. */
int tc_json_escape(sy_buf *out, const char *s, size_t n);
/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8 character. */
size_t tc_utf8_safe_len(const char *s, size_t n);

#endif
