#include "config.h"

#include "dist/rendezvous.h"
#include "dist/sockio.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RDV_MAGIC 0x53594e44u /* "SYND" */
#define RDV_VERSION 1u

typedef struct rdv_hello {
    uint32_t magic, version;
    int32_t nnodes, tp, node_rank, local_rank;
    uint64_t digest;
    char comm[32];
    char model[192];
} rdv_hello;

typedef struct rdv_reply {
    int32_t status; /* 0: go, text is the comm rendezvous; else text is why not */
    int32_t world;
    char text[504];
} rdv_reply;


static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

uint64_t sy_rdv_model_digest(const char *dir)
{
    uint64_t h = 1469598103934665603ull;
    if (!dir)
        return h;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (f) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            h = fnv(h, buf, n);
        fclose(f);
    }
    /* Weight files by name and size: reading gigabytes to compare is not worth it, and a different checkpoint
     * of one architecture differs here anyway. Sorted, since readdir's order is the file system's. */
    DIR *d = opendir(dir);
    if (!d)
        return h;
    char *names[1024];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < sizeof names / sizeof names[0];) {
        const size_t len = strlen(e->d_name);
        if (len > 12 && !strcmp(e->d_name + len - 12, ".safetensors"))
            if ((names[n] = strdup(e->d_name)))
                n++;
    }
    closedir(d);
    qsort(names, n, sizeof names[0], by_name);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        const long long size = stat(path, &st) == 0 ? (long long)st.st_size : -1;
        h = fnv(h, names[i], strlen(names[i]) + 1);
        h = fnv(h, &size, sizeof size);
        free(names[i]);
    }
    return h;
}

/* ----------------------------------------------------------- sockets */

static int split(const char *addr, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr)
        return -1;
    const char *h = addr, *he = colon;
    if (*h == '[' && he[-1] == ']') {
        h++;
        he--;
    }
    if ((size_t)(he - h) >= hcap || strlen(colon + 1) >= pcap)
        return -1;
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = 0;
    snprintf(port, pcap, "%s", colon + 1);
    return 0;
}

/* poll()'s timeout until deadline, in ms (0 once it has passed). */
static int ms_left(double deadline)
{
    const double left = deadline - sy_now();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* A listener on host:port (port "0": one the kernel picks); its port in *bound. */
static int listen_on(const char *host, const char *port, int *bound, sy_err *err, const char *what)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    int g = getaddrinfo(host, port, &hints, &ai);
    if (g != 0)
        return sy_err_set(err, SY_ERR_INVALID, "%s: cannot resolve %s: %s", what, host, gai_strerror(g));
    int e = 0;
    for (struct addrinfo *a = ai; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 256) == 0) {
            struct sockaddr_storage ss;
            socklen_t len = sizeof ss;
            getsockname(fd, (struct sockaddr *)&ss, &len);
            *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                    : ((struct sockaddr_in *)&ss)->sin_port);
            freeaddrinfo(ai);
            return fd;
        }
        e = errno;
        close(fd);
    }
    freeaddrinfo(ai);
    return sy_err_set(err, SY_ERR_IO, "%s: cannot listen on %s:%s: %s (it must be an address of node 0 itself)", what,
                      host, port, strerror(e));
}

static int connect_retry(const char *host, const char *port, double deadline, int *last_errno)
{
    for (;;) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        if (getaddrinfo(host, port, &hints, &ai) == 0) {
            for (struct addrinfo *a = ai; a; a = a->ai_next) {
                int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
                if (fd < 0)
                    continue;
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                    freeaddrinfo(ai);
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    return fd;
                }
                *last_errno = errno;
                close(fd);
            }
            freeaddrinfo(ai);
        } else {
            *last_errno = EHOSTUNREACH;
        }
        if (sy_now() >= deadline)
            return -1;
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
}

static void peer_name(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char h[64];
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0 ||
        getnameinfo((struct sockaddr *)&ss, len, h, sizeof h, NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(out, cap, "?");
    else
        snprintf(out, cap, "%s", h);
}

static void close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

/* ----------------------------------------------------------- node 0 */

/* Why a node's hello does not fit the run; "" when it does. */
static void judge(const sy_rdv_self *s, const rdv_hello *h, const int *fds, const char *from, char *why, size_t cap)
{
    why[0] = 0;
    if (h->nnodes != s->nnodes)
        snprintf(why, cap, "node %d (%s) was started with --nnodes %d, node 0 with --nnodes %d", h->node_rank, from,
                 h->nnodes, s->nnodes);
    else if (h->tp != s->tp)
        snprintf(why, cap, "node %d (%s) was started with --tp %d, node 0 with --tp %d; every node needs the same --tp",
                 h->node_rank, from, h->tp, s->tp);
    else if (h->node_rank == 0)
        snprintf(why, cap, "a second node (%s) says --node-rank 0; node 0 is the one at --dist-addr", from);
    else if (h->node_rank < 0 || h->node_rank >= s->nnodes || h->local_rank < 0 || h->local_rank >= s->tp)
        snprintf(why, cap, "a node (%s) says --node-rank %d local rank %d, expected 1..%d and 0..%d", from, h->node_rank,
                 h->local_rank, s->nnodes - 1, s->tp - 1);
    else if (fds[h->node_rank * s->tp + h->local_rank] >= 0) {
        char first[64];
        peer_name(fds[h->node_rank * s->tp + h->local_rank], first, sizeof first);
        snprintf(why, cap, "two nodes say --node-rank %d (from %s and from %s); each node needs its own", h->node_rank,
                 first, from);
    } else if (h->digest != s->digest)
        snprintf(why, cap,
                 "node %d (%s) runs model %s (digest %016llx), node 0 runs %s (digest %016llx); every node needs the "
                 "same model",
                 h->node_rank, from, h->model, (unsigned long long)h->digest, s->model ? s->model : "(none)",
                 (unsigned long long)s->digest);
    else if (strcmp(h->comm, s->comm) != 0)
        snprintf(why, cap, "node %d (%s) uses [comm] plugin = %s, node 0 uses %s; every rank needs the same", h->node_rank,
                 from, h->comm, s->comm);
}

static void answer(int fd, int status, int world, const char *text)
{
    rdv_reply rep = {.status = status, .world = world};
    snprintf(rep.text, sizeof rep.text, "%s", text);
    sy_sock_send_full(fd, &rep, sizeof rep);
}

static int run_node0(const sy_rdv_self *s, sy_rdv_result *r, const char *host, const char *port, sy_err *err)
{
    const int world = s->nnodes * s->tp;
    int bound = 0;
    int lfd = listen_on(host, port, &bound, err, "--dist-addr");
    if (lfd < 0)
        return lfd;
    const double deadline = sy_now() + s->timeout_s;
    int expected = world - s->tp, rc = SY_OK;
    char why[1024];
    while (expected > 0) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int pr = poll(&p, 1, ms_left(deadline));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            char miss[256] = "";
            size_t at = 0;
            for (int n = 1; n < s->nnodes && at + 8 < sizeof miss; n++)
                for (int l = 0; l < s->tp; l++)
                    if (r->fds[n * s->tp + l] < 0) {
                        at += (size_t)snprintf(miss + at, sizeof miss - at, "%s%d", at ? ", " : "", n);
                        break;
                    }
            snprintf(why, sizeof why,
                     "--nnodes %d: node(s) %s did not join at --dist-addr %s within %g s (--dist-timeout); start each "
                     "with --nnodes %d --node-rank R --dist-addr %s",
                     s->nnodes, miss, s->addr, s->timeout_s, s->nnodes, s->addr);
            rc = sy_err_set(err, SY_ERR_UNAVAILABLE, "%s", why);
            break;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        rdv_hello h;
        char from[64];
        peer_name(fd, from, sizeof from);
        /* Something that is not a switchyard node (a port scan, a health check): drop it and keep waiting. */
        if (sy_sock_recv_full(fd, &h, sizeof h, sy_now() + 5 < deadline ? sy_now() + 5 : deadline) != 0 ||
            h.magic != RDV_MAGIC || h.version != RDV_VERSION) {
            close(fd);
            continue;
        }
        h.comm[sizeof h.comm - 1] = 0;
        h.model[sizeof h.model - 1] = 0;
        judge(s, &h, r->fds, from, why, sizeof why);
        if (why[0]) {
            answer(fd, 1, world, why);
            close(fd);
            rc = sy_err_set(err, SY_ERR_INVALID, "%s", why);
            break;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        r->fds[h.node_rank * s->tp + h.local_rank] = fd;
        expected--;
    }
    close(lfd);
    if (rc) {
        for (int g = s->tp; g < world; g++)
            if (r->fds[g] >= 0)
                answer(r->fds[g], 1, world, why);
        close_all(r->fds, world);
        return rc;
    }
    /* The comm plugin's own meeting point on node 0, on a port the kernel picks (so no second port to agree
     * on); comm tcp and nccl at rank 0 take over the listening socket itself, so nothing can take the port
     * meanwhile. Other plugins get a string unique to the run. */
    r->comm_fd = -1;
    int cport = 0;
    const bool tcp = !strcmp(s->comm, "tcp") || !strcmp(s->comm, "nccl");
    if (tcp && (r->comm_fd = listen_on(host, "0", &cport, err, "comm tcp rendezvous")) < 0) {
        rc = r->comm_fd;
        r->comm_fd = -1;
        close_all(r->fds, world);
        return rc;
    }
    char base[128];
    snprintf(base, sizeof base, strchr(host, ':') ? "[%.80s]:%d/%ld-%ld" : "%.80s:%d/%ld-%ld", host, tcp ? cport : bound,
             (long)getpid(), (long)time(NULL));
    for (int g = s->tp; g < world; g++)
        if (r->fds[g] >= 0)
            answer(r->fds[g], 0, world, base);
    if (tcp)
        snprintf(r->comm_rdv, sizeof r->comm_rdv, "%s;fd=%d", base, r->comm_fd);
    else
        snprintf(r->comm_rdv, sizeof r->comm_rdv, "%s", base);
    return SY_OK;
}

/* ----------------------------------------------------------- node R > 0 */

static int run_node(const sy_rdv_self *s, sy_rdv_result *r, const char *host, const char *port, sy_err *err)
{
    const double deadline = sy_now() + s->timeout_s;
    for (int l = 0; l < s->tp; l++) {
        int last = 0;
        int fd = connect_retry(host, port, deadline, &last);
        if (fd < 0) {
            close_all(r->fds, s->tp);
            return sy_err_set(err, SY_ERR_UNAVAILABLE,
                              "--node-rank %d: nobody at --dist-addr %s after %g s (--dist-timeout): %s; node 0 "
                              "(--node-rank 0) listens there, so start it, or check the address and the firewall",
                              s->node_rank, s->addr, s->timeout_s, strerror(last));
        }
        rdv_hello h = {.magic = RDV_MAGIC, .version = RDV_VERSION, .nnodes = s->nnodes, .tp = s->tp,
                       .node_rank = s->node_rank, .local_rank = l, .digest = s->digest};
        snprintf(h.comm, sizeof h.comm, "%s", s->comm);
        snprintf(h.model, sizeof h.model, "%s", s->model ? s->model : "(none)");
        r->fds[l] = fd;
        if (sy_sock_send_full(fd, &h, sizeof h)) {
            close_all(r->fds, s->tp);
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "--node-rank %d: node 0 at %s closed the connection: %s",
                              s->node_rank, s->addr, strerror(errno));
        }
    }
    /* Node 0 answers once every node is in, which takes up to its own timeout; it always answers before that
     * ends, so waiting twice as long only matters when it is gone. */
    const double answer_by = sy_now() + 2 * s->timeout_s + 1;
    for (int l = 0; l < s->tp; l++) {
        rdv_reply rep;
        int k = sy_sock_recv_full(r->fds[l], &rep, sizeof rep, answer_by);
        rep.text[sizeof rep.text - 1] = 0;
        int rc = SY_OK;
        if (k != 0)
            rc = sy_err_set(err, SY_ERR_UNAVAILABLE,
                            "--node-rank %d: node 0 at %s %s before the run started (see its log)", s->node_rank,
                            s->addr, k > 0 ? "closed the rendezvous" : "did not answer");
        else if (rep.status != 0)
            rc = sy_err_set(err, SY_ERR_INVALID, "node 0 at %s refused --node-rank %d: %s", s->addr, s->node_rank,
                            rep.text);
        else if (rep.world != s->nnodes * s->tp)
            rc = sy_err_set(err, SY_ERR_INTERNAL, "node 0 says %d ranks, this node expected %d", rep.world,
                            s->nnodes * s->tp);
        if (rc) {
            close_all(r->fds, s->tp);
            return rc;
        }
        if (l == 0)
            snprintf(r->comm_rdv, sizeof r->comm_rdv, "%.159s", rep.text);
    }
    return SY_OK;
}

int sy_rdv_run(const sy_rdv_self *s, sy_rdv_result *r, sy_err *err)
{
    for (size_t i = 0; i < sizeof r->fds / sizeof r->fds[0]; i++)
        r->fds[i] = -1;
    r->comm_fd = -1;
    r->comm_rdv[0] = 0;
    char host[NI_MAXHOST], port[NI_MAXSERV];
    if (!s->addr || split(s->addr, host, sizeof host, port, sizeof port))
        return sy_err_set(err, SY_ERR_INVALID, "--nnodes %d needs --dist-addr HOST:PORT (node 0's address), found %s",
                          s->nnodes, s->addr ? s->addr : "none");
    if ((size_t)s->nnodes * (size_t)s->tp > sizeof r->fds / sizeof r->fds[0])
        return sy_err_set(err, SY_ERR_INVALID, "--nnodes %d x --tp %d is %d ranks, at most %zu", s->nnodes, s->tp,
                          s->nnodes * s->tp, sizeof r->fds / sizeof r->fds[0]);
    return s->node_rank == 0 ? run_node0(s, r, host, port, err) : run_node(s, r, host, port, err);
}
