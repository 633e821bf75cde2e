#include "config.h"

#include "dist/sockio.h"
#include "util/util.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

int sy_sock_send_full(int fd, const void *buf, size_t n)
{
    const char *b = buf;
    while (n) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int sy_sock_recv_full(int fd, void *buf, size_t n, double deadline)
{
    char *b = buf;
    while (n) {
        int ms = -1;
        if (deadline > 0) { /* past it, what has already arrived is still read */
            const double left = deadline - sy_now();
            ms = left <= 0 ? 0 : (int)(left * 1000) + 1;
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            if (sy_now() >= deadline) {
                errno = ETIMEDOUT;
                return -1;
            }
            continue;
        }
        ssize_t k = recv(fd, b, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            return 1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}
