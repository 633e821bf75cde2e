/*
 * frontend/http: TLS through OpenSSL, non-blocking on the loop's sockets.
 * TLS 1.2 and up with forward-secret AEAD ciphers only; ALPN picks h2 when
 * the client offers it, else http/1.1. Built without TLS when OpenSSL's
 * headers are missing (tls_cert then fails create() with the reason).
 */
#include "config.h"

#include <string.h>

#include "http.h"

#if SY_HTTP_TLS
#include <openssl/err.h>
#include <openssl/ssl.h>

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    static const unsigned char prefs[] = "\x02h2\x08http/1.1";
    if (SSL_select_next_proto((unsigned char **)out, outlen, prefs, sizeof prefs - 1, in, inlen) ==
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_OK;
    return SSL_TLSEXT_ERR_NOACK; /* no ALPN overlap: speak HTTP/1.1 */
}

int http_tls_init(http_server *s, sy_err *err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return sy_err_set(err, SY_ERR_INTERNAL, "http: SSL_CTX_new failed");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20");
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (SSL_CTX_use_certificate_chain_file(ctx, s->cfg.tls_cert) != 1) {
        char e[256];
        ERR_error_string_n(ERR_get_error(), e, sizeof e);
        SSL_CTX_free(ctx);
        return sy_err_set(err, SY_ERR_INVALID, "http: tls_cert %s: %s", s->cfg.tls_cert, e);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, s->cfg.tls_key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        char e[256];
        ERR_error_string_n(ERR_get_error(), e, sizeof e);
        SSL_CTX_free(ctx);
        return sy_err_set(err, SY_ERR_INVALID, "http: tls_key %s: %s", s->cfg.tls_key, e);
    }
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    s->ssl_ctx = ctx;
    return SY_OK;
}

void http_tls_free(http_server *s)
{
    if (s->ssl_ctx)
        SSL_CTX_free(s->ssl_ctx);
    s->ssl_ctx = NULL;
}

int http_tls_accept(http_conn *c)
{
    SSL *ssl = SSL_new(c->loop->srv->ssl_ctx);
    if (!ssl || SSL_set_fd(ssl, c->fd) != 1) {
        SSL_free(ssl);
        return -1;
    }
    SSL_set_accept_state(ssl);
    c->ssl = ssl;
    c->tls_handshaking = 1;
    return 0;
}

int http_tls_handshake(http_conn *c)
{
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        c->tls_handshaking = 0;
        const unsigned char *proto = NULL;
        unsigned int len = 0;
        SSL_get0_alpn_selected(c->ssl, &proto, &len);
        if (len == 2 && memcmp(proto, "h2", 2) == 0) {
            if (http_h2_init(c) < 0)
                return -1;
        } else if (len) {
            c->proto = HTTP_PROTO_H1;
        } /* no ALPN: sniff the preface like cleartext */
        return 1;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    ERR_clear_error();
    return -1;
}

long http_tls_read(http_conn *c, void *buf, size_t n)
{
    int r = SSL_read(c->ssl, buf, (int)(n > 1u << 30 ? 1u << 30 : n));
    if (r > 0)
        return r;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return -1;
    ERR_clear_error();
    return e == SSL_ERROR_ZERO_RETURN ? 0 : -2;
}

long http_tls_write(http_conn *c, const void *buf, size_t n)
{
    int r = SSL_write(c->ssl, buf, (int)(n > 1u << 30 ? 1u << 30 : n));
    if (r > 0)
        return r;
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return -1;
    ERR_clear_error();
    return -2;
}

void http_tls_conn_free(http_conn *c)
{
    if (c->ssl)
        SSL_free(c->ssl);
    c->ssl = NULL;
}

#else /* !SY_HTTP_TLS */

int http_tls_init(http_server *s, sy_err *err)
{
    (void)s;
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "http: built without OpenSSL, so tls_cert/tls_key cannot be used");
}
void http_tls_free(http_server *s) { (void)s; }
int http_tls_accept(http_conn *c) { (void)c; return -1; }
int http_tls_handshake(http_conn *c) { (void)c; return -1; }
long http_tls_read(http_conn *c, void *buf, size_t n) { (void)c; (void)buf; (void)n; return -2; }
long http_tls_write(http_conn *c, const void *buf, size_t n) { (void)c; (void)buf; (void)n; return -2; }
void http_tls_conn_free(http_conn *c) { (void)c; }

#endif
