/* comm/tcp: the mesh of connections and its transfers (see tcp_mesh.h). */
#include "config.h"

#include "tcp_mesh.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HELLO_MAGIC 0x53595448u /* "SYTH" */
#define FRAME_MAGIC 0x53595446u /* "SYTF" */

enum { HELLO_STORE = 1, HELLO_MESH = 2 };

typedef struct hello {
    uint32_t magic, kind;
    int32_t rank, world;
    uint64_t token;
    char addr[TCP_ADDR_LEN];
} hello;

/* Rank 0's answer to a rank that said hello: status 0 and the address table, or why not. */
typedef struct table_hdr {
    int32_t status;
    int32_t world;
    char msg[256];
} table_hdr;

typedef struct frame {
    uint32_t magic, op;
    uint64_t seq, bytes;
    uint64_t pad;
} frame;

_Static_assert(sizeof(frame) == 32, "the frame header is 32 bytes on the wire");

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* poll() timeout in ms until deadline (0: none) */
static int ms_left(double deadline)
{
    if (deadline <= 0)
        return -1;
    double left = deadline - now_s();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* Whole-buffer I/O on a blocking socket with a deadline: 0, 1 at end of file, -1 (errno; ETIMEDOUT). */
static int recv_full(int fd, void *buf, size_t n, double deadline)
{
    char *b = buf;
    while (n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = ETIMEDOUT;
            return -1;
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

static int send_full(int fd, const void *buf, size_t n)
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

/* "HOST:PORT" or "[V6]:PORT" into host and port; 0 or -1. */
static int split_addr(const char *s, size_t len, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (s[i] == ':')
            colon = s + i;
    if (!colon || colon == s)
        return -1;
    const char *h = s, *he = colon;
    if (*h == '[' && he[-1] == ']') {
        h++;
        he--;
    }
    const size_t hl = (size_t)(he - h), pl = len - (size_t)(colon + 1 - s);
    if (hl == 0 || hl >= hcap || pl == 0 || pl >= pcap)
        return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    memcpy(port, colon + 1, pl);
    port[pl] = 0;
    return 0;
}

static void format_addr(const struct sockaddr *sa, socklen_t len, char *out, size_t cap)
{
    char h[NI_MAXHOST], p[NI_MAXSERV];
    if (getnameinfo(sa, len, h, sizeof h, p, sizeof p, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, cap, "?");
        return;
    }
    snprintf(out, cap, strchr(h, ':') ? "[%s]:%s" : "%s:%s", h, p);
}

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/*
 * Connects to addr ("host:port"), retrying refused or unreachable attempts
 * until deadline: the other side may not be listening yet.
 */
static int connect_retry(const char *addr, double deadline, int rank, const char *whom, sy_err *err)
{
    char host[NI_MAXHOST], port[NI_MAXSERV];
    if (split_addr(addr, strlen(addr), host, sizeof host, port, sizeof port))
        return sy_err_set(err, SY_ERR_INVALID, "comm tcp: rank %d: %s address \"%s\", expected HOST:PORT", rank, whom,
                          addr);
    int last = 0;
    for (;;) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        int g = getaddrinfo(host, port, &hints, &ai);
        if (g == 0) {
            for (struct addrinfo *a = ai; a; a = a->ai_next) {
                int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
                if (fd < 0) {
                    last = errno;
                    continue;
                }
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                    freeaddrinfo(ai);
                    tune(fd);
                    return fd;
                }
                last = errno;
                close(fd);
            }
            freeaddrinfo(ai);
        }
        if (deadline > 0 && now_s() >= deadline) {
            if (g != 0)
                return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm tcp: rank %d cannot resolve %s %s: %s", rank, whom,
                                  addr, gai_strerror(g));
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm tcp: rank %d found nobody at %s (%s) before the timeout: %s",
                              rank, addr, whom, strerror(last));
        }
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

/* A listener on host (empty: any address) and an ephemeral port; its "ip:port" in out. */
static int listen_any(const char *host, int family, char *out, size_t cap, sy_err *err)
{
    struct addrinfo hints = {.ai_family = family, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int g = getaddrinfo(*host ? host : NULL, "0", &hints, &ai);
    if (g != 0)
        return sy_err_set(err, SY_ERR_INVALID, "comm tcp: listen_host \"%s\": %s", host, gai_strerror(g));
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, TCP_MAX_RANKS) != 0) {
        int e = errno;
        freeaddrinfo(ai);
        if (fd >= 0)
            close(fd);
        return sy_err_set(err, SY_ERR_IO, "comm tcp: cannot listen on %s: %s", *host ? host : "any address",
                          strerror(e));
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    format_addr((struct sockaddr *)&ss, len, out, cap);
    return fd;
}

/* Rank 0's store listener at host:port, or the launcher's socket (fd >= 0). */
static int listen_store(const char *host, const char *port, int fd, sy_err *err)
{
    if (fd >= 0) {
        int on = 0;
        socklen_t l = sizeof on;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &l) != 0 || !on)
            return sy_err_set(err, SY_ERR_INVALID, "comm tcp: rendezvous fd=%d is not a listening socket", fd);
        return fd;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g != 0)
        return sy_err_set(err, SY_ERR_INVALID, "comm tcp: rank 0 cannot resolve the rendezvous %s:%s: %s", host, port,
                          gai_strerror(g));
    int e = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, TCP_MAX_RANKS) == 0) {
            freeaddrinfo(ai);
            return fd;
        }
        e = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    return sy_err_set(err, SY_ERR_IO, "comm tcp: rank 0 cannot listen on the rendezvous %s:%s: %s", host, port,
                      strerror(e));
}

/* Accepts one connection before deadline; -1 with errno ETIMEDOUT. */
static int accept_until(int lfd, double deadline)
{
    for (;;) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int r = poll(&p, 1, ms_left(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            tune(fd);
            return fd;
        }
        if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
            return -1;
    }
}

void tcp_mesh_init(tcp_mesh *m)
{
    memset(m, 0, sizeof *m);
    m->world = 1;
    for (int r = 0; r < TCP_MAX_RANKS; r++)
        m->peers[r].fd = -1;
}

void tcp_mesh_close(tcp_mesh *m)
{
    for (int r = 0; r < TCP_MAX_RANKS; r++)
        if (m->peers[r].fd >= 0) {
            close(m->peers[r].fd);
            m->peers[r].fd = -1;
        }
}

/* The ranks in 1..world-1 with no connection yet, as "2, 5" (for a timeout message). */
static void missing(const tcp_mesh *m, int from, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    for (int r = from; r < m->world && at + 8 < cap; r++)
        if (r != m->rank && m->peers[r].fd < 0)
            at += (size_t)snprintf(out + at, cap - at, "%s%d", at ? ", " : "", r);
}

static void refuse(int fd, const char *msg)
{
    table_hdr t = {.status = 1};
    snprintf(t.msg, sizeof t.msg, "%s", msg);
    send_full(fd, &t, sizeof t);
}

static int store_rank0(tcp_mesh *m, int lfd, const char *where, uint64_t token, double deadline, sy_err *err)
{
    for (int got = 1; got < m->world;) {
        int fd = accept_until(lfd, deadline);
        if (fd < 0) {
            char miss[256];
            missing(m, 1, miss, sizeof miss);
            if (errno == ETIMEDOUT)
                return sy_err_set(err, SY_ERR_UNAVAILABLE,
                                  "comm tcp: rank 0 waited %.1f s at %s; rank(s) %s of %d never connected", m->timeout_s,
                                  where, miss, m->world);
            return sy_err_set(err, SY_ERR_IO, "comm tcp: rank 0 accepting at %s: %s", where, strerror(errno));
        }
        hello h;
        char msg[256];
        /* A connection that says nothing must not hold up the ranks behind it for the whole timeout. */
        const double hello_by = deadline > 0 && deadline < now_s() + 5 ? deadline : now_s() + 5;
        if (recv_full(fd, &h, sizeof h, hello_by) != 0 || h.magic != HELLO_MAGIC || h.kind != HELLO_STORE) {
            close(fd); /* not one of ours (a port scan, a stale run): keep waiting */
            continue;
        }
        h.addr[TCP_ADDR_LEN - 1] = 0;
        if (h.token != token) {
            refuse(fd, "comm tcp: rank 0 at this address belongs to another run (rendezvous token differs)");
            close(fd);
            continue;
        }
        if (h.world != m->world || h.rank < 1 || h.rank >= m->world || m->peers[h.rank].fd >= 0) {
            if (h.world != m->world)
                snprintf(msg, sizeof msg, "comm tcp: rank %d says the group has %d ranks, rank 0 says %d", h.rank,
                         h.world, m->world);
            else if (h.rank < 1 || h.rank >= m->world)
                snprintf(msg, sizeof msg, "comm tcp: rank %d is not in 1..%d", h.rank, m->world - 1);
            else
                snprintf(msg, sizeof msg, "comm tcp: rank %d joined twice (from %s and from %s)", h.rank,
                         m->peers[h.rank].addr, h.addr);
            refuse(fd, msg);
            close(fd);
            for (int r = 1; r < m->world; r++)
                if (m->peers[r].fd >= 0)
                    refuse(m->peers[r].fd, msg);
            return sy_err_set(err, SY_ERR_INVALID, "%s", msg);
        }
        m->peers[h.rank].fd = fd;
        snprintf(m->peers[h.rank].addr, TCP_ADDR_LEN, "%s", h.addr);
        got++;
    }
    const size_t tbytes = sizeof(table_hdr) + (size_t)m->world * TCP_ADDR_LEN;
    char *tab = calloc(1, tbytes);
    if (!tab)
        return sy_err_set(err, SY_ERR_NOMEM, "comm tcp: cannot allocate the address table");
    table_hdr th = {.status = 0, .world = m->world};
    memcpy(tab, &th, sizeof th);
    for (int r = 0; r < m->world; r++)
        memcpy(tab + sizeof th + (size_t)r * TCP_ADDR_LEN, m->peers[r].addr, TCP_ADDR_LEN);
    int rc = SY_OK;
    for (int r = 1; r < m->world && !rc; r++)
        if (send_full(m->peers[r].fd, tab, tbytes))
            rc = sy_err_set(err, SY_ERR_UNAVAILABLE, "comm tcp: rank %d (%s) left during the rendezvous: %s", r,
                            m->peers[r].addr, strerror(errno));
    free(tab);
    return rc;
}

static int store_follower(tcp_mesh *m, const char *store, const char *listen_host, uint64_t token, double deadline,
                          int *lfd_out, sy_err *err)
{
    int fd = connect_retry(store, deadline, m->rank, "rank 0 at the rendezvous", err);
    if (fd < 0)
        return fd;
    m->peers[0].fd = fd;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    char local[TCP_ADDR_LEN], host[NI_MAXHOST], port[NI_MAXSERV];
    format_addr((struct sockaddr *)&ss, len, local, sizeof local);
    /* By default listen on the interface that reaches rank 0: the other nodes are on that network too. */
    if (!*listen_host && split_addr(local, strlen(local), host, sizeof host, port, sizeof port) == 0)
        listen_host = host;
    hello h = {.magic = HELLO_MAGIC, .kind = HELLO_STORE, .rank = m->rank, .world = m->world, .token = token};
    int lfd = listen_any(listen_host, ss.ss_family, h.addr, sizeof h.addr, err);
    if (lfd < 0)
        return lfd;
    *lfd_out = lfd;
    if (send_full(fd, &h, sizeof h))
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm tcp: rank %d: rank 0 at %s closed the rendezvous: %s",
                          m->rank, store, strerror(errno));
    table_hdr th;
    int r = recv_full(fd, &th, sizeof th, deadline);
    if (r == 0 && th.status != 0) {
        th.msg[sizeof th.msg - 1] = 0;
        return sy_err_set(err, SY_ERR_INVALID, "%s (rank 0 refused rank %d)", th.msg, m->rank);
    }
    if (r == 0 && th.world != m->world)
        return sy_err_set(err, SY_ERR_INVALID, "comm tcp: rank 0 sent a table of %d ranks, rank %d expected %d",
                          th.world, m->rank, m->world);
    for (int q = 0; q < m->world && r == 0; q++)
        r = recv_full(fd, m->peers[q].addr, TCP_ADDR_LEN, deadline);
    if (r != 0)
        return sy_err_set(err, SY_ERR_UNAVAILABLE,
                          "comm tcp: rank %d got no address table from rank 0 at %s: %s (some rank never joined, or "
                          "rank 0 gave up)",
                          m->rank, store, r > 0 ? "it closed the connection" : strerror(errno));
    for (int q = 0; q < m->world; q++)
        m->peers[q].addr[TCP_ADDR_LEN - 1] = 0;
    snprintf(m->peers[0].addr, TCP_ADDR_LEN, "%s", store);
    return SY_OK;
}

/* Rank j >= 1: links to ranks 1..j-1 (it connects) and j+1.. (they connect). */
static int link_mesh(tcp_mesh *m, int lfd, uint64_t token, double deadline, sy_err *err)
{
    for (int q = 1; q < m->rank; q++) {
        int fd = connect_retry(m->peers[q].addr, deadline, m->rank, "a peer rank's listener", err);
        if (fd < 0)
            return fd;
        hello h = {.magic = HELLO_MAGIC, .kind = HELLO_MESH, .rank = m->rank, .world = m->world, .token = token};
        if (send_full(fd, &h, sizeof h)) {
            close(fd);
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm tcp: rank %d cannot greet rank %d (%s): %s", m->rank, q,
                              m->peers[q].addr, strerror(errno));
        }
        m->peers[q].fd = fd;
    }
    for (int got = m->rank + 1; got < m->world;) {
        int fd = accept_until(lfd, deadline);
        if (fd < 0) {
            char miss[256];
            missing(m, m->rank + 1, miss, sizeof miss);
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm tcp: rank %d: rank(s) %s never connected to it: %s",
                              m->rank, miss, strerror(errno));
        }
        hello h;
        if (recv_full(fd, &h, sizeof h, deadline) != 0 || h.magic != HELLO_MAGIC || h.kind != HELLO_MESH ||
            h.token != token || h.rank <= m->rank || h.rank >= m->world || m->peers[h.rank].fd >= 0) {
            close(fd);
            continue;
        }
        m->peers[h.rank].fd = fd;
        got++;
    }
    return SY_OK;
}

int tcp_mesh_join(tcp_mesh *m, int rank, int world, const char *rendezvous, const char *listen_host, double timeout_s,
                  sy_err *err)
{
    if (world < 1 || world > TCP_MAX_RANKS)
        return sy_err_set(err, SY_ERR_INVALID, "comm tcp: world_size %d, expected 1..%d", world, TCP_MAX_RANKS);
    if (rank < 0 || rank >= world)
        return sy_err_set(err, SY_ERR_INVALID, "comm tcp: rank %d is not in 0..%d", rank, world - 1);
    if (!rendezvous)
        rendezvous = "";
    m->rank = rank;
    m->world = world;
    m->timeout_s = timeout_s;
    if (world == 1)
        return SY_OK; /* a group of one meets nobody: any rendezvous will do */
    /* "HOST:PORT[/TOKEN][;fd=N]": the address part ends at '/' or ';'. */
    const size_t alen = strcspn(rendezvous, "/;");
    const char *semi = strchr(rendezvous, ';');
    const size_t tlen = semi ? (size_t)(semi - rendezvous) : strlen(rendezvous);
    char host[NI_MAXHOST], port[NI_MAXSERV], store[TCP_ADDR_LEN];
    if (split_addr(rendezvous, alen, host, sizeof host, port, sizeof port) || alen >= sizeof store)
        return sy_err_set(err, SY_ERR_INVALID,
                          "comm tcp: rendezvous \"%s\", expected HOST:PORT[/TOKEN] (rank 0 listens there; with "
                          "--nnodes the launcher passes --dist-addr's host and a port of its own)",
                          rendezvous);
    memcpy(store, rendezvous, alen);
    store[alen] = 0;
    int given_fd = -1;
    if (semi && strncmp(semi, ";fd=", 4) == 0)
        given_fd = atoi(semi + 4);
    snprintf(m->peers[0].addr, TCP_ADDR_LEN, "%s", store);
    const uint64_t token = fnv1a(rendezvous, tlen);
    const double deadline = timeout_s > 0 ? now_s() + timeout_s : 0;
    int rc, lfd = -1;
    if (rank == 0) {
        lfd = listen_store(host, port, given_fd, err);
        if (lfd < 0)
            return lfd;
        rc = store_rank0(m, lfd, store, token, deadline, err);
    } else {
        rc = store_follower(m, store, listen_host ? listen_host : "", token, deadline, &lfd, err);
        if (!rc)
            rc = link_mesh(m, lfd, token, deadline, err);
    }
    if (lfd >= 0)
        close(lfd);
    if (rc)
        tcp_mesh_close(m);
    for (int q = 0; q < world && !rc; q++)
        if (m->peers[q].fd >= 0)
            fcntl(m->peers[q].fd, F_SETFL, fcntl(m->peers[q].fd, F_GETFL) | O_NONBLOCK);
    return rc;
}

/* ------------------------------------------------------------ transfers */

static const char *const op_names[] = {"?", "allreduce_sum", "allgather", "broadcast", "barrier"};

static uint32_t op_id(const char *op)
{
    for (uint32_t i = 1; i < sizeof op_names / sizeof op_names[0]; i++)
        if (!strcmp(op, op_names[i]))
            return i;
    return 0;
}

typedef struct xstate {
    frame sh, rh;
    size_t sdone, rdone; /* bytes of header + payload moved */
} xstate;

static int fail(tcp_mesh *m, sy_err *err, int code, const char *fmt, const char *a, const char *b, int peer)
{
    char msg[512];
    snprintf(msg, sizeof msg, fmt, peer, m->peers[peer].addr, a, b);
    m->broken = true;
    snprintf(m->broken_msg, sizeof m->broken_msg, "%s", msg);
    return sy_err_set(err, code, "%s", msg);
}

int tcp_mesh_exchange(tcp_mesh *m, const char *op, tcp_xfer *x, sy_err *err)
{
    if (m->broken)
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm tcp: %s refused, the group broke earlier: %s", op,
                          m->broken_msg);
    const uint32_t id = op_id(op);
    const uint64_t seq = ++m->seq;
    xstate st[TCP_MAX_RANKS];
    struct pollfd pf[TCP_MAX_RANKS];
    int who[TCP_MAX_RANKS];
    for (int q = 0; q < m->world; q++) {
        st[q] = (xstate){.sh = {.magic = FRAME_MAGIC, .op = id, .seq = seq, .bytes = x[q].slen}};
        if (q == m->rank)
            x[q].send = x[q].recv = false;
    }
    double last = now_s();
    for (;;) {
        int n = 0;
        for (int q = 0; q < m->world; q++) {
            const bool s = x[q].send && st[q].sdone < sizeof(frame) + x[q].slen;
            const bool r = x[q].recv && st[q].rdone < sizeof(frame) + x[q].rlen;
            if (!s && !r)
                continue;
            pf[n] = (struct pollfd){.fd = m->peers[q].fd, .events = (short)((s ? POLLOUT : 0) | (r ? POLLIN : 0))};
            who[n++] = q;
        }
        if (n == 0)
            return SY_OK;
        int ms = -1;
        if (m->timeout_s > 0) {
            const double left = last + m->timeout_s - now_s();
            ms = left <= 0 ? 0 : (int)(left * 1000) + 1;
        }
        int pr = poll(pf, (nfds_t)n, ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return sy_err_set(err, SY_ERR_IO, "comm tcp: poll in %s: %s", op, strerror(errno));
        if (pr == 0) {
            char secs[32], me[16];
            snprintf(secs, sizeof secs, "%.1f", m->timeout_s);
            snprintf(me, sizeof me, "%d", m->rank);
            /* The first peer still owing data is as good a name as any: each is stuck or slow. */
            int q = who[0];
            for (int i = 0; i < n; i++)
                if (pf[i].events & POLLIN) {
                    q = who[i];
                    break;
                }
            char msg[512];
            snprintf(msg, sizeof msg,
                     "comm tcp: rank %d (%s) moved no data for %s s during %s; rank %s gives up (stuck, or "
                     "unreachable; --dist-timeout)",
                     q, m->peers[q].addr, secs, op, me);
            m->broken = true;
            snprintf(m->broken_msg, sizeof m->broken_msg, "%s", msg);
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "%s", msg);
        }
        for (int i = 0; i < n; i++) {
            const int q = who[i];
            xstate *s = &st[q];
            char me[16];
            snprintf(me, sizeof me, "%d", m->rank);
            if (pf[i].revents & (POLLOUT | POLLERR | POLLHUP) && (pf[i].events & POLLOUT)) {
                const size_t total = sizeof(frame) + x[q].slen;
                const char *src = s->sdone < sizeof(frame) ? (const char *)&s->sh + s->sdone
                                                           : (const char *)x[q].sbuf + (s->sdone - sizeof(frame));
                const size_t len = s->sdone < sizeof(frame) ? sizeof(frame) - s->sdone : total - s->sdone;
                ssize_t k = send(pf[i].fd, src, len, MSG_NOSIGNAL);
                if (k > 0) {
                    s->sdone += (size_t)k;
                    last = now_s();
                } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
                    return fail(m, err, SY_ERR_UNAVAILABLE,
                                "comm tcp: rank %d (%s) closed the connection; rank %s gives up %s", me, op, q);
                }
            }
            if (pf[i].revents & (POLLIN | POLLERR | POLLHUP) && (pf[i].events & POLLIN)) {
                const size_t total = sizeof(frame) + x[q].rlen;
                char *dst = s->rdone < sizeof(frame) ? (char *)&s->rh + s->rdone
                                                     : (char *)x[q].rbuf + (s->rdone - sizeof(frame));
                const size_t len = s->rdone < sizeof(frame) ? sizeof(frame) - s->rdone : total - s->rdone;
                ssize_t k = recv(pf[i].fd, dst, len, 0);
                if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
                    return fail(m, err, SY_ERR_UNAVAILABLE,
                                "comm tcp: rank %d (%s) closed the connection; rank %s gives up %s", me, op, q);
                if (k < 0)
                    continue;
                const size_t before = s->rdone;
                s->rdone += (size_t)k;
                last = now_s();
                if (before < sizeof(frame) && s->rdone >= sizeof(frame)) {
                    const frame *h = &s->rh;
                    if (h->magic != FRAME_MAGIC || h->op != id || h->seq != seq || h->bytes != x[q].rlen) {
                        char mine[160], theirs[160];
                        snprintf(mine, sizeof mine, "rank %d is in %s #%llu of %zu bytes", m->rank, op,
                                 (unsigned long long)seq, x[q].rlen);
                        snprintf(theirs, sizeof theirs, "%s #%llu of %llu bytes",
                                 h->magic == FRAME_MAGIC && h->op < sizeof op_names / sizeof op_names[0]
                                     ? op_names[h->op]
                                     : "garbage",
                                 (unsigned long long)h->seq, (unsigned long long)h->bytes);
                        return fail(m, err, SY_ERR_INTERNAL,
                                    "comm tcp: rank %d (%s) sent %s, but %s (the ranks disagree on the collectives)",
                                    theirs, mine, q);
                    }
                }
            }
        }
    }
}
