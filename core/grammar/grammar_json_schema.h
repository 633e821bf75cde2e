/*
 * What the JSON schema compiler's files share (grammar_json_schema.c: the
 * schema walk, scalars, arrays, unions, $ref; grammar_json_object.c:
 * objects). Every sub-schema becomes a GBNF expression appended to an
 * sy_gbuf; helper rules go to the compiler's rule text.
 */
#ifndef SY_GRAMMAR_JSON_SCHEMA_H
#define SY_GRAMMAR_JSON_SCHEMA_H

#include <jansson.h>

#include "grammar/grammar_build.h"

/* A $ref already given a rule (so recursion refers to it by name). */
typedef struct sy_gjs_ref {
    char *ref;
    char *rule;
} sy_gjs_ref;

typedef struct sy_gjs {
    const char *name;      /* the root rule; helpers are NAME-... */
    unsigned flags;        /* SY_JSON_SCHEMA_* */
    json_t *root;          /* the whole schema, for $ref */
    const char *root_path; /* where it sits in the request */
    sy_gbuf rules;         /* the GBNF written so far */
    unsigned next_id;      /* numbers helper rules */
    sy_gjs_ref *refs;
    size_t n_refs, cap_refs;
    sy_err *err;
    int depth; /* nesting, bounded by SCHEMA_MAX_DEPTH */
} sy_gjs;

/* "base.seg", malloc'd. */
char *sy_gjs_join(const char *base, const char *seg);
/* SY_ERR_NOMEM with the schema's path. */
int sy_gjs_oom(sy_gjs *c);
/* A fresh helper rule name NAME-<kind><n>, malloc'd. */
char *sy_gjs_new_rule(sy_gjs *c, const char *kind);
/* Appends "rule ::= body" to the rule text. */
void sy_gjs_define(sy_gjs *c, const char *rule, const char *body);
/* Appends expr to out, as a rule of its own when it is long. */
int sy_gjs_put_ref(sy_gjs *c, sy_gbuf *out, const char *kind, const sy_gbuf *expr);
/* Appends the expression for schema s (at path) to out. */
int sy_gjs_gen(sy_gjs *c, json_t *s, const char *path, sy_gbuf *out);
/* The object part of s (properties, required, additionalProperties). */
int sy_gjs_object(sy_gjs *c, json_t *s, const char *path, sy_gbuf *out);

#endif
