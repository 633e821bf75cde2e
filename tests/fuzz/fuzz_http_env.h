/*
 * An in-process stand-in for the HTTP frontend's surroundings, shared by the
 * http_h1 and openai fuzz targets: one server with one loop (default
 * configuration, no threads), one HTTP/1.1 connection over a socketpair
 * whose far end the harness drains, and a fake serving API whose engine
 * answers every submitted request with a few events when the harness says
 * so. The fake asserts the sy_request contract (plugin.h) on every submit,
 * so a request the frontend should have refused is a crash, not a pass.
 */
#ifndef SY_FUZZ_HTTP_ENV_H
#define SY_FUZZ_HTTP_ENV_H

#include <stddef.h>

#include "http.h"

typedef struct fuzz_http_env fuzz_http_env;

/* NULL only when out of memory or descriptors. */
fuzz_http_env *fuzz_http_env_new(void);
void fuzz_http_env_free(fuzz_http_env *e);

/* The open connection (NULL once it was closed; a new one after reconnect). */
http_conn *fuzz_http_conn(fuzz_http_env *e);
/* Opens a fresh HTTP/1.1 connection, closing the previous one. */
http_conn *fuzz_http_reconnect(fuzz_http_env *e);
/* What the loop does after parsing: flush, and close a connection marked closed. */
void fuzz_http_flush(fuzz_http_env *e);
/* Runs the fake engine: every live request gets its events (text, for a
 * request with tools a tool call in three pieces that split a UTF-8
 * character, then DONE or ERROR), then the loop drains them. */
void fuzz_http_run_engine(fuzz_http_env *e);
/* Status of the first final (non-1xx) response on the current connection;
 * 0 while none has arrived. */
int fuzz_http_first_status(const fuzz_http_env *e);
/* Closes the connection and finishes every request still in the engine,
 * so nothing is left allocated between inputs. */
void fuzz_http_reset(fuzz_http_env *e);

#endif
