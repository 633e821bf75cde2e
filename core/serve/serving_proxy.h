/*
 * The host that frontends see during `serve`. Frontends start before the
 * model loads, so /health can answer 503 while it does; until the server
 * exists, the proxy answers "not ready" (submit: SY_ERR_UNAVAILABLE), and
 * from then on it forwards every call to the server's serving API.
 */
#ifndef SY_SERVING_PROXY_H
#define SY_SERVING_PROXY_H

#include "plugin/host.h"

typedef struct sy_serving_proxy sy_serving_proxy;

sy_serving_proxy *sy_serving_proxy_new(void);
void sy_serving_proxy_free(sy_serving_proxy *p);
/* The host table to hand to frontend plugins (valid until free). */
const sy_host *sy_serving_proxy_host(sy_serving_proxy *p);
/* Starts forwarding to target (a host whose serving is set); NULL: loading again. */
void sy_serving_proxy_set_target(sy_serving_proxy *p, const sy_host *target);

#endif
