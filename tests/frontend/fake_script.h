/*
 * What the fake host (fake_host.c) generates for requests that ask for a
 * shape rather than free text, as a real engine with constrained decoding
 * and a tool-call parser would deliver it:
 *   constraint JSON_SCHEMA  a JSON instance of the schema (every property,
 *                           first enum value, minItems items; $ref/$defs,
 *                           anyOf/oneOf followed), as text in 4-byte pieces
 *   JSON_OBJECT             {"ok": true}
 *   CHOICE                  the first string
 *   tool_choice REQUIRED    one call of the first tool; FUNCTION: of the named one
 *   AUTO and the prompt word "calltwo"
 *                           the text "Let me check. ", then a call of the
 *                           first tool and (parallel_tool_calls) one of the
 *                           second (or the first again), finish "tool_calls"
 * Calls have ids "call_s0", "call_s1" and arguments that are an instance
 * of the tool's parameters, sent in 3-byte pieces that may split a UTF-8
 * character (the frontend must not).
 */
#ifndef SY_TEST_FAKE_SCRIPT_H
#define SY_TEST_FAKE_SCRIPT_H

#include <stddef.h>

#include "switchyard/plugin.h"

typedef struct fake_piece {
    int call;          /* -1: text; else the call's index */
    const char *id;    /* a call's first piece only */
    const char *name;  /* a call's first piece only */
    const char *bytes; /* text, or a piece of the arguments */
    size_t len;
} fake_piece;

typedef struct fake_script {
    fake_piece *pieces;
    size_t n, at;
    const char *finish; /* "stop" or "tool_calls" */
    char *owned[8];     /* the texts the pieces point into */
    size_t n_owned;
} fake_script;

/* NULL when the request asks for nothing scripted (or out of memory). */
fake_script *fake_script_new(const sy_request *req, int calltwo);
void fake_script_free(fake_script *s);
/* The JSON text of an instance of schema_json (malloc'd); NULL if it is not JSON. */
char *fake_instance(const char *schema_json);

#endif
