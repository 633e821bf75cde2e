/*
 * Whole-buffer I/O on the launcher's blocking sockets (the step-plan
 * channel, the multi-node rendezvous): one loop for both, so a short read,
 * EINTR, a peer's close and a deadline mean the same thing everywhere.
 */
#ifndef SY_DIST_SOCKIO_H
#define SY_DIST_SOCKIO_H

#include <stddef.h>

/* All n bytes, never raising SIGPIPE: 0, or -1 with errno. */
int sy_sock_send_full(int fd, const void *buf, size_t n);

/*
 * All n bytes by deadline (sy_now() seconds; 0: no deadline): 0; 1 at end
 * of file (the peer closed); -1 with errno, ETIMEDOUT at the deadline.
 */
int sy_sock_recv_full(int fd, void *buf, size_t n, double deadline);

#endif
