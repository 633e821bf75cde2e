/* A small blocking HTTP/2 cleartext client (prior knowledge) on nghttp2's
 * session API, for the tests: many streams on one connection. */
#ifndef SY_TEST_H2_CLIENT_H
#define SY_TEST_H2_CLIENT_H

#include <stddef.h>

typedef struct h2_result {
    int status;
    char body[8192];
    size_t len;
    int closed;
} h2_result;

/* Sends n POSTs (path, body) on one connection to 127.0.0.1:port and waits
 * for all answers. reset_after > 0: resets each stream once that many body
 * bytes arrived (a client that gives up). Returns 0, -1 on a transport error. */
int h2_run(int port, const char *path, const char *body, int n, size_t reset_after, h2_result *out);

#endif
