/*
 * --plot: a PNG line chart drawn here, no graphics library: output and
 * total tok/s (left axis) and TPOT p50 (right axis) against the levels.
 * 8-bit palette image, zlib stream of stored deflate blocks, own CRC-32
 * and Adler-32, text in a built-in 5x7 bitmap font.
 */
#include "config.h"

#include "bench/bench.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W 800
#define H 480
#define X0 90
#define X1 710
#define Y0 70
#define Y1 410

enum { C_BG, C_FG, C_GRID, C_TOTAL, C_OUT, C_TPOT, C_N };
static const unsigned char palette[C_N][3] = {
    {255, 255, 255}, {0, 0, 0}, {220, 220, 220}, {31, 119, 180}, {44, 160, 44}, {214, 39, 40},
};

static const char font_chars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ.-+/():=,";
static const unsigned char font[][7] = {
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}, {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E},
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}, {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E},
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}, {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E},
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}, {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08},
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}, {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C},
    {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}, {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E},
    {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}, {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C},
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}, {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10},
    {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}, {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11},
    {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}, {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C},
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}, {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F},
    {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}, {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11},
    {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10},
    {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}, {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11},
    {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}, {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04},
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}, {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04},
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}, {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11},
    {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}, {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F},
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}, {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00},
    {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00}, {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00},
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}, {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08},
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00}, {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00},
    {0x00, 0x00, 0x00, 0x00, 0x0C, 0x04, 0x08},
};

typedef struct canvas {
    unsigned char *px; /* W*H palette indices */
} canvas;

static void put(canvas *c, int x, int y, int col)
{
    if (x >= 0 && x < W && y >= 0 && y < H)
        c->px[y * W + x] = (unsigned char)col;
}

static void rect(canvas *c, int x, int y, int w, int h, int col)
{
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++)
            put(c, x + i, y + j, col);
}

static void line(canvas *c, int x0, int y0, int x1, int y1, int col, int thick)
{
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        rect(c, x0 - thick / 2, y0 - thick / 2, thick, thick, col);
        if (x0 == x1 && y0 == y1)
            break;
        int e2 = 2 * e;
        if (e2 >= dy) {
            e += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            e += dx;
            y0 += sy;
        }
    }
}

static int text_width(const char *s, int scale)
{
    return (int)strlen(s) * 6 * scale;
}

static void text(canvas *c, int x, int y, const char *s, int col, int scale)
{
    for (; *s; s++, x += 6 * scale) {
        char ch = *s >= 'a' && *s <= 'z' ? (char)(*s - 32) : *s;
        const char *f = strchr(font_chars, ch);
        if (!f || ch == 0)
            continue;
        const unsigned char *g = font[f - font_chars];
        for (int r = 0; r < 7; r++)
            for (int b = 0; b < 5; b++)
                if (g[r] & (0x10 >> b))
                    rect(c, x + b * scale, y + r * scale, scale, scale, col);
    }
}

static void fmt_num(char *buf, size_t len, double v)
{
    if (v >= 10000)
        snprintf(buf, len, "%.0f", v);
    else if (v >= 100)
        snprintf(buf, len, "%.0f", v);
    else if (v >= 10)
        snprintf(buf, len, "%.1f", v);
    else
        snprintf(buf, len, "%.2f", v);
}

/* ---- PNG encoding ---- */

static unsigned long crc_update(unsigned long crc, const unsigned char *p, size_t n)
{
    crc ^= 0xFFFFFFFFul;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320ul & (0ul - (crc & 1ul)));
    }
    return crc ^ 0xFFFFFFFFul;
}

static void be32(unsigned char *p, unsigned long v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static int chunk(FILE *f, const char *type, const unsigned char *data, size_t n)
{
    unsigned char hdr[8];
    be32(hdr, (unsigned long)n);
    memcpy(hdr + 4, type, 4);
    unsigned long crc = crc_update(0, hdr + 4, 4);
    crc = crc_update(crc, data, n); /* chains like zlib crc32() */
    unsigned char tail[4];
    be32(tail, crc);
    return fwrite(hdr, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) && fwrite(tail, 1, 4, f) == 4 ? 0 : -1;
}

static int write_png(const char *path, const canvas *c, char *err, size_t errlen)
{
    size_t raw_len = (size_t)H * (W + 1);
    unsigned char *raw = malloc(raw_len);
    size_t nblocks = (raw_len + 65534) / 65535;
    size_t z_len = 2 + raw_len + nblocks * 5 + 4;
    unsigned char *z = malloc(z_len);
    if (!raw || !z) {
        free(raw);
        free(z);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int y = 0; y < H; y++) {
        raw[(size_t)y * (W + 1)] = 0; /* filter: none */
        memcpy(raw + (size_t)y * (W + 1) + 1, c->px + (size_t)y * W, W);
    }
    size_t o = 0;
    z[o++] = 0x78;
    z[o++] = 0x01;
    unsigned long a = 1, b = 0;
    for (size_t off = 0; off < raw_len;) {
        size_t n = raw_len - off < 65535 ? raw_len - off : 65535;
        z[o++] = off + n == raw_len ? 1 : 0;
        z[o++] = (unsigned char)n;
        z[o++] = (unsigned char)(n >> 8);
        z[o++] = (unsigned char)~n;
        z[o++] = (unsigned char)(~n >> 8);
        memcpy(z + o, raw + off, n);
        for (size_t i = 0; i < n; i++) {
            a = (a + raw[off + i]) % 65521;
            b = (b + a) % 65521;
        }
        o += n;
        off += n;
    }
    be32(z + o, (b << 16) | a);
    o += 4;
    unsigned char ihdr[13];
    be32(ihdr, W);
    be32(ihdr + 4, H);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 3;  /* palette */
    ihdr[10] = ihdr[11] = ihdr[12] = 0;
    FILE *f = fopen(path, "wb");
    int rc = -1;
    if (f) {
        static const unsigned char sig[8] = {137, 80, 78, 71, 13, 10, 26, 10};
        rc = fwrite(sig, 1, 8, f) == 8 && chunk(f, "IHDR", ihdr, 13) == 0 &&
                     chunk(f, "PLTE", &palette[0][0], sizeof palette) == 0 && chunk(f, "IDAT", z, o) == 0 &&
                     chunk(f, "IEND", NULL, 0) == 0
                 ? 0
                 : -1;
        if (fclose(f) != 0)
            rc = -1;
    }
    if (rc < 0)
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    free(raw);
    free(z);
    return rc;
}

/* ---- the chart ---- */

static double nice_max(double v)
{
    if (v <= 0)
        return 1;
    double p = pow(10, floor(log10(v)));
    double m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

static void series(canvas *c, const double *v, int n, double ymax, int col)
{
    int px = 0, py = 0;
    for (int i = 0; i < n; i++) {
        int x = X0 + (int)((i + 0.5) * (X1 - X0) / n);
        int y = Y1 - (int)(v[i] / ymax * (Y1 - Y0));
        if (i > 0)
            line(c, px, py, x, y, col, 2);
        rect(c, x - 3, y - 3, 7, 7, col);
        px = x;
        py = y;
    }
}

int bench_write_plot(const char *path, const bench_stats *s, int n, char *err, size_t errlen)
{
    canvas c;
    c.px = calloc((size_t)W * H, 1);
    double *tot = calloc((size_t)n + 1, sizeof *tot), *out = calloc((size_t)n + 1, sizeof *out);
    double *tpot = calloc((size_t)n + 1, sizeof *tpot);
    if (!c.px || !tot || !out || !tpot) {
        free(c.px);
        free(tot);
        free(out);
        free(tpot);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    double tmax = 0, pmax = 0;
    for (int i = 0; i < n; i++) {
        tot[i] = s[i].total_throughput;
        out[i] = s[i].output_throughput;
        tpot[i] = s[i].tpot_p50;
        tmax = fmax(tmax, tot[i]);
        pmax = fmax(pmax, tpot[i]);
    }
    tmax = nice_max(tmax * 1.05);
    pmax = nice_max(pmax * 1.05);
    text(&c, (W - text_width("SWITCHYARD BENCH", 2)) / 2, 12, "SWITCHYARD BENCH", C_FG, 2);
    /* legend */
    int lx = X0;
    rect(&c, lx, 44, 14, 4, C_TOTAL);
    text(&c, lx + 20, 40, "TOTAL TOK/S", C_FG, 1);
    lx += 20 + text_width("TOTAL TOK/S", 1) + 24;
    rect(&c, lx, 44, 14, 4, C_OUT);
    text(&c, lx + 20, 40, "OUTPUT TOK/S", C_FG, 1);
    lx += 20 + text_width("OUTPUT TOK/S", 1) + 24;
    rect(&c, lx, 44, 14, 4, C_TPOT);
    text(&c, lx + 20, 40, "TPOT P50 MS (RIGHT AXIS)", C_FG, 1);
    /* grid, ticks and labels */
    for (int k = 0; k <= 5; k++) {
        int y = Y1 - k * (Y1 - Y0) / 5;
        line(&c, X0, y, X1, y, C_GRID, 1);
        char buf[32];
        fmt_num(buf, sizeof buf, tmax * k / 5);
        text(&c, X0 - 8 - text_width(buf, 1), y - 3, buf, C_FG, 1);
        fmt_num(buf, sizeof buf, pmax * k / 5);
        text(&c, X1 + 8, y - 3, buf, C_TPOT, 1);
    }
    line(&c, X0, Y0, X0, Y1, C_FG, 1);
    line(&c, X1, Y0, X1, Y1, C_FG, 1);
    line(&c, X0, Y1, X1, Y1, C_FG, 1);
    text(&c, X0 - 8 - text_width("TOK/S", 1), Y0 - 16, "TOK/S", C_FG, 1);
    text(&c, X1 + 8, Y0 - 16, "TPOT MS", C_TPOT, 1);
    for (int i = 0; i < n; i++) {
        int x = X0 + (int)((i + 0.5) * (X1 - X0) / n);
        char buf[32];
        if (s[i].request_rate > 0)
            snprintf(buf, sizeof buf, "R%g", s[i].request_rate);
        else if (s[i].concurrency > 0)
            snprintf(buf, sizeof buf, "%d", s[i].concurrency);
        else
            snprintf(buf, sizeof buf, "INF");
        line(&c, x, Y1, x, Y1 + 5, C_FG, 1);
        text(&c, x - text_width(buf, 1) / 2, Y1 + 10, buf, C_FG, 1);
    }
    const char *xl = n > 0 && s[0].request_rate > 0 ? "REQUEST RATE (REQ/S)" : "MAX CONCURRENCY";
    text(&c, (X0 + X1 - text_width(xl, 2)) / 2, Y1 + 34, xl, C_FG, 2);
    series(&c, tot, n, tmax, C_TOTAL);
    series(&c, out, n, tmax, C_OUT);
    series(&c, tpot, n, pmax, C_TPOT);
    int rc = write_png(path, &c, err, errlen);
    free(c.px);
    free(tot);
    free(out);
    free(tpot);
    return rc;
}
