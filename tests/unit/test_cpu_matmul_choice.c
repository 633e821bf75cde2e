/*
 * The `matmul` key of the cpu plugins (f32 | bf16 | auto, the default auto):
 * syk_matmul_decide over every ISA case a CPU can present (AMX granted or
 * refused, AVX512-BF16 alone, AVX-512 without BF16, AVX2, portable) on any
 * machine; the plugins' `auto` resolving on this CPU as that function says;
 * and, under make check, that the suite pins matmul = f32 (SWITCHYARD_SET
 * from Makefile.am), so the exactness tests stay exact on a CPU with AMX.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sykmatmul.h"
#include "test_cpu_harness.h"

static th_plugin dev, moe;
static th_host host;
static int warn_lines, info_lines;
static char last_line[512];

static void capture_log(void *ctx, sy_log_level level, const char *plugin, const char *msg)
{
    (void)ctx;
    (void)plugin;
    if (strncmp(msg, "matmul = ", 9) != 0)
        return;
    if (level == SY_LOG_WARN)
        warn_lines++;
    else
        info_lines++;
    snprintf(last_line, sizeof last_line, "%s", msg);
}

static const char *path_name(syk_path p)
{
    return p == SYK_PATH_AMX ? "amx" : p == SYK_PATH_AVX512BF16 ? "avx512-bf16" : "f32";
}

/*
 * A CPU (and instance) the decision can meet. auto and bf16 take the same
 * path on each; they differ in their lines' start and in that only bf16
 * warns when it falls back to f32. f32 is the same line everywhere.
 */
typedef struct cpu_case {
    const char *cpu;
    int amx_off;
    syk_matmul_caps caps; /* isa, avx512bf16, amx, amx_granted, amx_why */
    int wants_amx;        /* auto and bf16 ask Linux for the tile state */
    syk_path path;
    int warn;             /* auto's and bf16's on a BF16 path; bf16's alone on f32 */
    const char *why;      /* what both lines end with */
} cpu_case;

#define REFUSED "arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) refused (simulated by SY_CPU_AMX_REFUSE)"
#define GRANTED "(the CPU has AMX-BF16 and Linux granted the tile state)"
#define NO_BF16(isa) "no native BF16 dot product with the " isa " kernels (needs AVX512_BF16 and isa avx512)"

static const cpu_case cpus[] = {
    {"AMX, tiles granted", 0, {SYK_ISA_AVX512, 1, 1, 1, NULL}, 1, SYK_PATH_AMX, 0, GRANTED},
    {"AMX, tiles refused", 0, {SYK_ISA_AVX512, 1, 1, 0, REFUSED}, 1, SYK_PATH_AVX512BF16, 1, REFUSED},
    {"AMX, amx = off", 1, {SYK_ISA_AVX512, 1, 1, 0, NULL}, 0, SYK_PATH_AVX512BF16, 0, "amx = off"},
    {"AVX512_BF16 without AMX", 0, {SYK_ISA_AVX512, 1, 0, 0, "this CPU has no AMX"}, 0, SYK_PATH_AVX512BF16, 0,
     "this CPU has no AMX"},
    {"AVX512_BF16, no reason given", 0, {SYK_ISA_AVX512, 1, 0, 0, NULL}, 0, SYK_PATH_AVX512BF16, 0, "no AMX-BF16 here"},
    {"AVX-512 without BF16", 0, {SYK_ISA_AVX512, 0, 0, 0, NULL}, 0, SYK_PATH_F32, 1,
     "this CPU lacks AVX512_BF16 (CPUID leaf 7.1 EAX bit 5)"},
    {"AVX2", 0, {SYK_ISA_AVX2, 0, 0, 0, NULL}, 0, SYK_PATH_F32, 1, NO_BF16("avx2")},
    /* isa = avx2 named on an AMX machine: the avx2 kernels have no BF16 path, whatever the CPU has. */
    {"isa avx2 on an AMX CPU", 0, {SYK_ISA_AVX2, 1, 1, 1, NULL}, 0, SYK_PATH_F32, 1, NO_BF16("avx2")},
    {"portable kernels", 0, {SYK_ISA_PORTABLE, 1, 1, 1, NULL}, 0, SYK_PATH_F32, 1, NO_BF16("portable")},
};

/* The line a user reads for req on c: "matmul = auto: f32, <why>", "matmul = bf16: bf16 on ..., <why>", ... */
static void want_line(const cpu_case *c, syk_matmul_req req, char *buf, size_t cap)
{
    const char *r = syk_matmul_req_name(req);
    if (c->path == SYK_PATH_AMX)
        snprintf(buf, cap, "matmul = %s: bf16 on AMX-BF16 tiles %s", r, c->why);
    else if (c->path == SYK_PATH_AVX512BF16)
        snprintf(buf, cap, "matmul = %s: bf16 on the AVX512-BF16 kernel, not AMX: %s", r, c->why);
    else if (req == SYK_MATMUL_BF16)
        snprintf(buf, cap, "matmul = bf16 falls back to f32: %s", c->why);
    else
        snprintf(buf, cap, "matmul = auto: f32, %s", c->why);
}

/* One request on one CPU: the path, whether it asks for the tiles, the level and the whole line. */
static void check_decision(const cpu_case *c, syk_matmul_req req, syk_path path, int wants, int warn,
                           const char *line)
{
    syk_matmul_choice ch;
    syk_matmul_decide(req, c->amx_off, &c->caps, &ch);
    const char *r = syk_matmul_req_name(req);
    const int got_wants = syk_matmul_wants_amx(req, c->amx_off, &c->caps);
    TH_CHECK(got_wants == wants, "%s, %s: asks for the tile state: %d, expected %d", c->cpu, r, got_wants, wants);
    TH_CHECK(ch.path == path, "%s, %s: runs %s, expected %s", c->cpu, r, path_name(ch.path), path_name(path));
    TH_CHECK(ch.warn == warn, "%s, %s: logs at %s, expected %s", c->cpu, r, ch.warn ? "WARN" : "INFO",
             warn ? "WARN" : "INFO");
    TH_CHECK(strcmp(ch.line, line) == 0, "%s, %s: logs \"%s\", expected \"%s\"", c->cpu, r, ch.line, line);
    TH_CHECK(ch.req == req, "%s, %s: recorded as %s", c->cpu, r, syk_matmul_req_name(ch.req));
}

static void test_decide(void)
{
    char line[400];
    for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
        const cpu_case *c = &cpus[i];
        want_line(c, SYK_MATMUL_AUTO, line, sizeof line);
        check_decision(c, SYK_MATMUL_AUTO, c->path, c->wants_amx, c->path != SYK_PATH_F32 && c->warn, line);
        want_line(c, SYK_MATMUL_BF16, line, sizeof line);
        check_decision(c, SYK_MATMUL_BF16, c->path, c->wants_amx, c->warn, line);
        /* f32 never asks for the tiles nor warns, on any CPU. */
        check_decision(c, SYK_MATMUL_F32, SYK_PATH_F32, 0, 0,
                       "matmul = f32: F32 products (exact, the reference's numerics)");
    }
    syk_matmul_req r;
    TH_CHECK(!syk_matmul_parse("auto", &r) && r == SYK_MATMUL_AUTO, "auto not parsed");
    TH_CHECK(!syk_matmul_parse("f32", &r) && r == SYK_MATMUL_F32, "f32 not parsed");
    TH_CHECK(!syk_matmul_parse("bf16", &r) && r == SYK_MATMUL_BF16, "bf16 not parsed");
    TH_CHECK(syk_matmul_parse("fp8", &r) && syk_matmul_parse("", &r) && syk_matmul_parse(NULL, &r),
             "fp8, empty or NULL accepted as a matmul value");
}

/* This CPU's caps, probed the way syk_matmul_select does it, decided by the pure function. */
static void expected_here(syk_matmul_req req, syk_isa isa, syk_matmul_choice *out)
{
    char amx_why[240] = "";
    syk_matmul_caps caps = {isa, 0, 0, 0, amx_why};
    caps.avx512bf16 = isa == SYK_ISA_AVX512 && syk_bf16dot_for(isa, NULL, 0) != NULL;
    caps.amx = syk_cpu_has_amx_bf16(amx_why, sizeof amx_why);
    if (syk_matmul_wants_amx(req, 0, &caps))
        caps.amx_granted = syk_amx_for(isa, amx_why, sizeof amx_why) != NULL;
    syk_matmul_decide(req, 0, &caps, out);
}

static const char *line_of(const th_plugin *p, void *inst)
{
    const char *(*f)(void *) = NULL;
    void *sym = p->desc->get_proc ? p->desc->get_proc("matmul") : NULL;
    memcpy(&f, &sym, sizeof f);
    return f ? f(inst) : NULL;
}

/* Creates p with kv, checks its resolved line against want (a prefix or the whole line) and one log line. */
static void check_plugin(const th_plugin *p, const char *const *kv, const char *want, int whole, int want_warn,
                         const char *what)
{
    sy_err err;
    void *inst = NULL;
    warn_lines = info_lines = 0;
    last_line[0] = '\0';
    if (th_create(p, &host.api, kv, &inst, &err)) {
        th_fail(__FILE__, __LINE__, "%s %s: create failed: %s", p->desc->name, what, err.msg);
        return;
    }
    const char *got = line_of(p, inst);
    TH_CHECK(got && (whole ? strcmp(got, want) == 0 : strncmp(got, want, strlen(want)) == 0),
             "%s %s: get_proc(\"matmul\") says \"%s\", expected %s\"%s\"", p->desc->name, what, got ? got : "(none)",
             whole ? "" : "a line starting ", want);
    TH_CHECK(warn_lines + info_lines == 1 && strcmp(last_line, got ? got : "") == 0,
             "%s %s: %d warning and %d info lines about matmul at create (last \"%s\"), expected the one line",
             p->desc->name, what, warn_lines, info_lines, last_line);
    TH_CHECK(warn_lines == want_warn, "%s %s: logged at %s, expected %s", p->desc->name, what,
             warn_lines ? "WARN" : "INFO", want_warn ? "WARN" : "INFO");
    p->desc->destroy(inst);
}

static void test_plugins_here(void)
{
    const syk_isa best = syk_isa_best();
    syk_matmul_choice want;
    expected_here(SYK_MATMUL_AUTO, best, &want);
    printf("this CPU, isa %s: %s\n", syk_isa_name(best), want.line);
    const char *const auto_kv[] = {"matmul", "auto", NULL};
    check_plugin(&dev, auto_kv, want.line, 1, want.warn, "matmul = auto");
    check_plugin(&moe, auto_kv, want.line, 1, want.warn, "matmul = auto");
    /* Each ISA this machine runs, named: auto follows the kernels, not only the CPU. */
    static const char *const isas[] = {"portable", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        syk_isa isa;
        if (syk_isa_parse(isas[i], &isa) || !syk_isa_usable(isa, NULL, 0))
            continue;
        expected_here(SYK_MATMUL_AUTO, isa, &want);
        const char *const kv[] = {"matmul", "auto", "isa", isas[i], NULL};
        char what[64];
        snprintf(what, sizeof what, "isa %s matmul = auto", isas[i]);
        check_plugin(&dev, kv, want.line, 1, want.warn, what);
        expected_here(SYK_MATMUL_BF16, isa, &want);
        const char *const kvb[] = {"matmul", "bf16", "isa", isas[i], NULL};
        snprintf(what, sizeof what, "isa %s matmul = bf16", isas[i]);
        check_plugin(&moe, kvb, want.line, 1, want.warn, what);
    }
    const char *const f32_kv[] = {"matmul", "f32", NULL};
    check_plugin(&dev, f32_kv, "matmul = f32: F32 products", 0, 0, "matmul = f32");
    sy_err err;
    void *inst = NULL;
    const char *const bad[] = {"matmul", "fp8", NULL};
    TH_CHECK(th_create(&dev, &host.api, bad, &inst, &err) != SY_OK && strstr(err.msg, "fp8") &&
                 strstr(err.msg, "auto"),
             "matmul = fp8 accepted or the error does not list auto: %s", err.msg);
    if (inst)
        dev.desc->destroy(inst);
}

/* Under make check: the suite's environment pins f32 for every instance a test makes without naming matmul. */
static void test_suite_pin(void)
{
    if (!getenv("SY_BUILDDIR")) {
        printf("not under make check (no SY_BUILDDIR): the suite's pin is not checked\n");
        return;
    }
    const char *env = getenv("SWITCHYARD_SET");
    printf("SWITCHYARD_SET=%s\n", env ? env : "(unset)");
    char buf[64];
    const th_plugin *ps[] = {&dev, &moe};
    for (int i = 0; i < 2; i++) {
        const char *v = th_key_value(ps[i], NULL, "matmul", buf, sizeof buf);
        TH_CHECK(v && strcmp(v, "f32") == 0,
                 "make check must pin %s matmul = f32 (SWITCHYARD_SET in Makefile.am's AM_TESTS_ENVIRONMENT), "
                 "found %s: the exactness tests would run bf16 on a CPU with AMX or AVX512_BF16",
                 ps[i]->desc->name, v ? v : "(undeclared)");
        check_plugin(ps[i], NULL, "matmul = f32: ", 0, 0, "with the suite's environment");
    }
    /* A test that exercises bf16 or auto names it, and that beats the environment (as --set does). */
    const char *const kv[] = {"matmul", "auto", NULL};
    TH_CHECK(strcmp(th_key_value(&dev, kv, "matmul", buf, sizeof buf), "auto") == 0,
             "an explicit matmul = auto lost to SWITCHYARD_SET");
    syk_matmul_choice want;
    expected_here(SYK_MATMUL_AUTO, syk_isa_best(), &want);
    check_plugin(&dev, kv, want.line, 1, want.warn, "matmul = auto over the environment");
}

int main(void)
{
    th_load("sy-device-cpu", &dev);
    th_load("sy-moe-cpu", &moe);
    th_host_init(&host);
    host.api.log = capture_log;
    test_decide();
    test_plugins_here();
    test_suite_pin();
    th_unload(&moe);
    th_unload(&dev);
    return th_done("test_cpu_matmul_choice");
}
