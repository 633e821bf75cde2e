/*
 * `switchyard doctor`: what this machine offers the plugins and what goes
 * wrong when a GPU does not show up.
 *
 *   1. NVIDIA driver and CUDA runtime: versions, or a diagnosis of a failed
 *      initialisation naming its known causes;
 *   2. each GPU: compute capability, memory, PCI bus id;
 *   3. the peer-to-peer matrix (cuDeviceCanAccessPeer) with the nvidia-smi
 *      topology kind of each pair (NV, PIX, PXB, PHB, NODE, SYS) from NVML
 *      when libnvidia-ml is present;
 *   4. which plugin `auto` picks for each kind, and every candidate's probe
 *      score or reason, from the loader's own probes;
 *   5. the GPU each local rank computes on (rank r on GPU r with the default
 *      [device] gpu = -1), with the device and attention plugins each rank
 *      would take (the loader's probes with that local rank): for --tp N,
 *      else one rank per GPU. It warns when the GPUs differ in compute
 *      capability, and says when --tp N cannot run here (fewer GPUs than
 *      ranks, ranks sharing a pinned GPU, a device plugin that cannot run).
 *
 * The core links no CUDA library: the driver (libcuda.so.1), the runtime
 * (libcudart) and NVML (libnvidia-ml.so.1) are dlopen'ed, and every one of
 * them may be missing.
 */
#include "config.h"

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "plugin/host.h"
#include "plugin/loader.h"
#include "plugin/loader_config.h"
#include "util/util.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { DOCTOR_OK = 0, DOCTOR_PLUGIN_MISSING = 1, DOCTOR_USAGE = 2, DOCTOR_NO_GPU = 3, DOCTOR_TP_CANNOT = 4 };

#define MAX_GPUS 64

/* The few driver API entry points used, with the driver's own (ABI-stable) signatures. */
typedef struct cu_api {
    void *dl;
    int (*init)(unsigned);
    int (*driver_version)(int *);
    int (*device_count)(int *);
    int (*device_get)(int *, int);
    int (*device_name)(char *, int, int);
    int (*device_attr)(int *, int, int);
    int (*total_mem)(size_t *, int);
    int (*can_access_peer)(int *, int, int);
    int (*pci_bus_id)(char *, int, int);
    int (*error_name)(int, const char **);
} cu_api;

#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76
#define CU_ATTR_SM_COUNT 16

typedef struct gpu_info {
    int dev;
    char name[256];
    char bus[32];
    int cc_major, cc_minor, sms;
    size_t mem;
} gpu_info;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard doctor [--tp N] [-c CONFIG] [--plugin-dir DIR]... [--set section.key=value]...\n"
            "Reports the NVIDIA driver and CUDA runtime (or why they cannot start, with the known causes),\n"
            "each GPU's compute capability and memory, the peer-to-peer matrix with its topology, which\n"
            "plugin `auto` picks for each kind, with every candidate's probe result, and the GPU and plugins\n"
            "each local rank would take (rank r on GPU r unless [device] gpu pins one).\n"
            "  --tp N   would `--tp N` run here? (the ranks' GPUs and plugins with this configuration)\n"
            "Exit status: 0 a usable NVIDIA GPU and a plugin of every kind; 3 no usable NVIDIA GPU (the CPU\n"
            "plugins serve; the diagnosis says why); 1 `auto` finds no plugin for some kind; 4 --tp N cannot\n"
            "run here (the report says why); 2 bad usage.\n");
}

static void *sym(void *dl, const char *name)
{
    return dl ? dlsym(dl, name) : NULL;
}

static int load_cu(cu_api *cu, char *why, size_t cap)
{
    memset(cu, 0, sizeof *cu);
    cu->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu->dl) {
        const char *e = dlerror();
        snprintf(why, cap, "%s", e ? e : "libcuda.so.1: cannot open");
        return -1;
    }
    *(void **)&cu->init = sym(cu->dl, "cuInit");
    *(void **)&cu->driver_version = sym(cu->dl, "cuDriverGetVersion");
    *(void **)&cu->device_count = sym(cu->dl, "cuDeviceGetCount");
    *(void **)&cu->device_get = sym(cu->dl, "cuDeviceGet");
    *(void **)&cu->device_name = sym(cu->dl, "cuDeviceGetName");
    *(void **)&cu->device_attr = sym(cu->dl, "cuDeviceGetAttribute");
    *(void **)&cu->total_mem = sym(cu->dl, "cuDeviceTotalMem_v2");
    *(void **)&cu->can_access_peer = sym(cu->dl, "cuDeviceCanAccessPeer");
    *(void **)&cu->pci_bus_id = sym(cu->dl, "cuDeviceGetPCIBusId");
    *(void **)&cu->error_name = sym(cu->dl, "cuGetErrorName");
    if (!cu->init || !cu->driver_version || !cu->device_count || !cu->device_get || !cu->device_name ||
        !cu->device_attr || !cu->total_mem || !cu->can_access_peer || !cu->pci_bus_id) {
        snprintf(why, cap, "libcuda.so.1 lacks driver API entry points (cuInit, cuDeviceGetAttribute, ...)");
        dlclose(cu->dl);
        cu->dl = NULL;
        return -1;
    }
    return 0;
}

static const char *cu_err_name(const cu_api *cu, int code)
{
    const char *s = NULL;
    if (cu->error_name && cu->error_name(code, &s) == 0 && s)
        return s;
    return "CUDA_ERROR_?";
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* First line of a small text file, or "" when it cannot be read. */
static void first_line(const char *path, char *out, size_t cap)
{
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, (int)cap, f))
        out[strcspn(out, "\n")] = 0;
    fclose(f);
}

/* The CUDA runtime's version, from whichever libcudart loads (it needs no driver). */
static int runtime_version(char *lib, size_t cap)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so",
                                        NULL};
    for (const char *const *n = names; *n; n++) {
        void *dl = dlopen(*n, RTLD_NOW | RTLD_LOCAL);
        if (!dl)
            continue;
        int (*get)(int *) = NULL;
        *(void **)&get = dlsym(dl, "cudaRuntimeGetVersion");
        int v = 0;
        if (get && get(&v) == 0) {
            snprintf(lib, cap, "%s", *n);
            dlclose(dl);
            return v;
        }
        dlclose(dl);
    }
    return 0;
}

static void print_cuda_version(const char *what, int v)
{
    printf("  %-22s CUDA %d.%d\n", what, v / 1000, (v % 1000) / 10);
}

/* The diagnosis of a failed cuInit, by error code. */
static void diagnose_init(const cu_api *cu, int code, int runtime)
{
    printf("  cuInit failed: %s (%d)\n  known causes:\n", cu_err_name(cu, code), code);
    switch (code) {
    case 100: /* CUDA_ERROR_NO_DEVICE */
        printf("    - the driver is loaded but sees no GPU: check `nvidia-smi`, and CUDA_VISIBLE_DEVICES (%s)\n",
               getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
        printf("    - in a container: the GPU was not passed in (docker --gpus all / the NVIDIA container toolkit)\n");
        break;
    case 35: /* CUDA_ERROR_INSUFFICIENT_DRIVER */
        printf("    - the driver is older than the CUDA runtime%s: upgrade the driver or install the matching "
               "cuda-compat package\n", runtime ? "" : " the plugins were built with");
        break;
    case 803: /* CUDA_ERROR_SYSTEM_DRIVER_MISMATCH */
        printf("    - the kernel module and the user-space driver (libcuda) have different versions: reboot after a "
               "driver update, or reinstall one driver\n");
        break;
    case 804: /* CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE */
        printf("    - a cuda-compat libcuda is in use on a GPU it does not support: remove it from "
               "LD_LIBRARY_PATH\n");
        break;
    default: /* 3 CUDA_ERROR_NOT_INITIALIZED, 999 CUDA_ERROR_UNKNOWN, others */
        printf("    - nvidia-uvm failed to initialise. On kernels with HMM (heterogeneous memory management, Linux "
               "6.x) some drivers fail here with cudaErrorInitializationError: set `options nvidia_uvm "
               "uvm_disable_hmm=1` in /etc/modprobe.d and reload nvidia_uvm\n");
        printf("    - /dev/nvidia-uvm is %s (created when nvidia_uvm loads: `nvidia-modprobe -u -c=0`)\n",
               file_exists("/dev/nvidia-uvm") ? "present" : "MISSING");
        printf("    - the process cannot open /dev/nvidia* (permissions, cgroup device rules in a container)\n");
        break;
    }
    char hmm[64];
    first_line("/sys/module/nvidia_uvm/parameters/uvm_disable_hmm", hmm, sizeof hmm);
    if (hmm[0])
        printf("  nvidia_uvm uvm_disable_hmm = %s\n", hmm);
}

/* ------------------------------------------------------------------ NVML */

typedef struct nvml_api {
    void *dl;
    int (*shutdown)(void);
    int (*by_bus)(const char *, void **);
    int (*common_ancestor)(void *, void *, int *);
    int (*p2p_status)(void *, void *, int, int *);
} nvml_api;

static int load_nvml(nvml_api *n)
{
    memset(n, 0, sizeof *n);
    n->dl = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->dl)
        return -1;
    int (*init)(void) = NULL;
    *(void **)&init = sym(n->dl, "nvmlInit_v2");
    *(void **)&n->shutdown = sym(n->dl, "nvmlShutdown");
    *(void **)&n->by_bus = sym(n->dl, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&n->common_ancestor = sym(n->dl, "nvmlDeviceGetTopologyCommonAncestor");
    *(void **)&n->p2p_status = sym(n->dl, "nvmlDeviceGetP2PStatus");
    if (!init || !n->shutdown || !n->by_bus || !n->common_ancestor || init() != 0) {
        dlclose(n->dl);
        n->dl = NULL;
        return -1;
    }
    return 0;
}

static void unload_nvml(nvml_api *n)
{
    if (n->dl) {
        n->shutdown();
        dlclose(n->dl);
        n->dl = NULL;
    }
}

/* nvidia-smi topo -m's kind of a pair, or "?" */
static const char *topo_kind(const nvml_api *n, const gpu_info *a, const gpu_info *b)
{
    void *ha = NULL, *hb = NULL;
    if (!n->dl || n->by_bus(a->bus, &ha) != 0 || n->by_bus(b->bus, &hb) != 0)
        return "?";
    int st = 1;
    if (n->p2p_status && n->p2p_status(ha, hb, 2 /* NVML_P2P_CAPS_INDEX_NVLINK */, &st) == 0 && st == 0)
        return "NV";
    int level = -1;
    if (n->common_ancestor(ha, hb, &level) != 0)
        return "?";
    switch (level) {
    case 0: return "X";    /* NVML_TOPOLOGY_INTERNAL: the same board */
    case 10: return "PIX"; /* one PCIe switch */
    case 20: return "PXB"; /* several PCIe switches */
    case 30: return "PHB"; /* a PCIe host bridge */
    case 40: return "NODE"; /* host bridges of one NUMA node */
    case 50: return "SYS"; /* across NUMA nodes (SMP interconnect) */
    default: return "?";
    }
}

/* ------------------------------------------------------------------- GPUs */

/* Returns the number of GPUs found (0 when none is usable; the diagnosis is printed). */
static int report_gpus(gpu_info *g, int cap)
{
    printf("NVIDIA driver and CUDA runtime:\n");
    char rtlib[64] = "";
    const int rt = runtime_version(rtlib, sizeof rtlib);
    if (rt)
        printf("  %-22s CUDA %d.%d (%s)\n", "runtime", rt / 1000, (rt % 1000) / 10, rtlib);
    else
        printf("  %-22s no libcudart found (the CUDA plugins link their own)\n", "runtime");
    char ver[256];
    first_line("/proc/driver/nvidia/version", ver, sizeof ver);
    if (ver[0])
        printf("  %-22s %s\n", "kernel module", ver);

    cu_api cu;
    char why[512];
    if (load_cu(&cu, why, sizeof why)) {
        printf("  no NVIDIA driver/GPU found: the driver library cannot be loaded (%s)\n", why);
        printf("  known causes:\n"
               "    - no NVIDIA driver is installed on this machine (a CPU-only host: the CPU plugins serve)\n"
               "    - in a container: the driver libraries were not mounted (the NVIDIA container toolkit does "
               "this)\n");
        printf("    - /dev/nvidiactl is %s\n", file_exists("/dev/nvidiactl") ? "present" : "absent");
        return 0;
    }
    int n = 0, dv = 0;
    const int rc = cu.init(0);
    if (cu.driver_version(&dv) == 0 && dv)
        print_cuda_version("driver supports", dv);
    if (rc != 0) {
        diagnose_init(&cu, rc, rt);
        dlclose(cu.dl);
        return 0;
    }
    if (rt && dv && rt > dv)
        printf("  WARNING: the runtime (CUDA %d.%d) is newer than the driver supports (CUDA %d.%d): kernels will "
               "fail with cudaErrorInsufficientDriver; upgrade the driver or install cuda-compat\n",
               rt / 1000, (rt % 1000) / 10, dv / 1000, (dv % 1000) / 10);
    if (cu.device_count(&n) != 0 || n <= 0) {
        printf("  no NVIDIA driver/GPU found: the driver loaded but reports no GPU (CUDA_VISIBLE_DEVICES=%s)\n",
               getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
        dlclose(cu.dl);
        return 0;
    }
    if (n > cap)
        n = cap;
    printf("\nGPUs:\n  %-3s %-28s %-6s %-5s %-10s %s\n", "#", "NAME", "CC", "SMS", "MEMORY", "PCI BUS");
    for (int i = 0; i < n; i++) {
        gpu_info *x = &g[i];
        memset(x, 0, sizeof *x);
        cu.device_get(&x->dev, i);
        cu.device_name(x->name, sizeof x->name, x->dev);
        cu.device_attr(&x->cc_major, CU_ATTR_CC_MAJOR, x->dev);
        cu.device_attr(&x->cc_minor, CU_ATTR_CC_MINOR, x->dev);
        cu.device_attr(&x->sms, CU_ATTR_SM_COUNT, x->dev);
        cu.total_mem(&x->mem, x->dev);
        cu.pci_bus_id(x->bus, sizeof x->bus, x->dev);
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", x->cc_major, x->cc_minor);
        printf("  %-3d %-28s %-6s %-5d %6.1f GiB %s\n", i, x->name, cc, x->sms, (double)x->mem / 1073741824.0,
               x->bus);
    }
    if (n > 1) {
        nvml_api nv;
        const int have_nvml = load_nvml(&nv) == 0;
        printf("\npeer access (cuDeviceCanAccessPeer; topology kind from %s):\n      ",
               have_nvml ? "NVML" : "nowhere: libnvidia-ml.so.1 not loaded");
        for (int j = 0; j < n; j++)
            printf(" GPU%-6d", j);
        printf("\n");
        for (int i = 0; i < n; i++) {
            printf("  GPU%-2d", i);
            for (int j = 0; j < n; j++) {
                if (i == j) {
                    printf(" %-9s", "X");
                    continue;
                }
                int ok = 0;
                cu.can_access_peer(&ok, g[i].dev, g[j].dev);
                char cell[16];
                snprintf(cell, sizeof cell, "%s/%s", ok ? "yes" : "no", have_nvml ? topo_kind(&nv, &g[i], &g[j]) : "?");
                printf(" %-9s", cell);
            }
            printf("\n");
        }
        printf("  (yes/no: peer access; NV = NVLink, PIX/PXB = PCIe switch(es), PHB = host bridge, NODE/SYS = "
               "through the CPU)\n");
        unload_nvml(&nv);
    }
    dlclose(cu.dl);
    return n;
}

/* -------------------------------------------------------------- plugins */

/* Prints every candidate of a kind and the loader's pick; returns 0 when auto resolves. */
static int report_kind(sy_loader *ld, const sy_host *host, const sy_plugin_listing *l, size_t nl, sy_plugin_kind kind,
                       const char *device, const char **picked_device)
{
    sy_plugin *p = NULL;
    sy_err err = {{0}};
    const int rc = sy_loader_resolve(ld, kind, "auto", device, host, &p, &err);
    if (rc)
        printf("  %-8s auto finds none: %s\n", sy_kind_name(kind), err.msg);
    else
        printf("  %-8s auto picks %s (%s)\n", sy_kind_name(kind), p->desc->name, p->path);
    for (size_t i = 0; i < nl; i++) {
        const sy_plugin_desc *d = l[i].desc;
        if (!d || d->kind != (int)kind)
            continue;
        const int other_device = device && d->device && *d->device && strcmp(d->device, device) != 0;
        if (other_device)
            printf("  %-8s   %-12s runs on device %s, not %s\n", "", d->name, d->device, device);
        else if (l[i].score > 0)
            printf("  %-8s   %-12s score %d\n", "", d->name, l[i].score);
        else
            printf("  %-8s   %-12s cannot run: %s\n", "", d->name, l[i].why);
    }
    if (!rc) {
        if (picked_device)
            *picked_device = p->desc->device; /* descriptors outlive the handle (see loader.c) */
        sy_plugin_close(p);
    }
    return rc ? 1 : 0;
}

static int report_plugins(sy_loader *ld)
{
    sy_host_ctx host;
    sy_host_init(&host);
    sy_plugin_listing *l = NULL;
    size_t n = 0;
    sy_err err = {{0}};
    int bad = 0;
    printf("\nplugins `auto` picks (highest probe score among those for the picked device):\n");
    if (sy_loader_list(ld, &host.api, &l, &n, &err)) {
        printf("  cannot list the plugins: %s\n", err.msg);
        sy_host_fini(&host);
        return 1;
    }
    const char *device = NULL;
    bad |= report_kind(ld, &host.api, l, n, SY_KIND_DEVICE, NULL, &device);
    bad |= report_kind(ld, &host.api, l, n, SY_KIND_ATTN, device, NULL);
    bad |= report_kind(ld, &host.api, l, n, SY_KIND_MOE, device, NULL);
    bad |= report_kind(ld, &host.api, l, n, SY_KIND_COMM, device, NULL);
    sy_loader_list_free(ld, l, n);
    sy_host_fini(&host);
    return bad;
}

/* ------------------------------------------------------------- ranks */

/* Whether a plugin declares a config key (a device plugin with "gpu" picks one of several GPUs). */
static int declares_key(const sy_plugin_desc *d, const char *key)
{
    for (const sy_key_decl *k = d->keys; k && k->name; k++)
        if (strcmp(k->name, key) == 0)
            return 1;
    return 0;
}

/* The configured plugin of a section, or auto. */
static const char *spec_of(const sy_config *cfg, const char *section)
{
    const char *s = sy_config_get(cfg, section, "plugin");
    return s && *s ? s : "auto";
}

/*
 * What each local rank would take: the device plugin ([device] plugin, or
 * auto with the rank's local rank in the host table, as the engine opens
 * it), its GPU (the pinned [device] gpu, else the local rank), and the
 * attention plugin for that device. ranks: --tp N, or 0 for one rank per
 * GPU. Returns 0 when every rank can run, 1 when --tp N cannot (said why).
 */
static int report_ranks(sy_loader *ld, const sy_config *cfg, int ranks, const gpu_info *g, int n_gpus)
{
    const int asked = ranks > 0;
    if (!asked)
        ranks = n_gpus;
    if (ranks <= 0)
        return 0;
    const char *pin_s = sy_config_get(cfg, "device", "gpu");
    long long pin = -1;
    if (pin_s && *pin_s) {
        char *end = NULL;
        pin = strtoll(pin_s, &end, 10);
        if (!end || *end)
            pin = -1; /* not a number: device create says so; report the default */
    }
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    printf("\nranks on this node (%s%d, CUDA_VISIBLE_DEVICES=%s; rank r computes on GPU r unless [device] gpu "
           "pins one):\n", asked ? "--tp " : "one per GPU: ", ranks, cvd ? cvd : "unset");
    sy_host_ctx host;
    sy_host_init(&host);
    int cannot = 0, shared = 0, beyond = 0, cc_differ = 0, first_cc = -1;
    for (int r = 0; r < ranks; r++) {
        host.api.local_rank = r;
        sy_plugin *dp = NULL;
        sy_err err = {{0}};
        const char *dspec = spec_of(cfg, "device");
        if (sy_loader_resolve(ld, SY_KIND_DEVICE, dspec, NULL, &host.api, &dp, &err)) {
            printf("  rank %-3d device %s cannot run: %s\n", r, dspec, err.msg);
            cannot = 1;
            continue;
        }
        const sy_plugin_desc *dd = dp->desc; /* descriptors outlive the handle (see loader.c) */
        char where[400] = "";
        if (declares_key(dd, "gpu")) {
            const long long gpu = pin >= 0 ? pin : r;
            shared |= pin >= 0 && ranks > 1;
            const int cuda = dd->device && strcmp(dd->device, "cuda") == 0;
            if (cuda && gpu < n_gpus) {
                const gpu_info *x = &g[gpu];
                snprintf(where, sizeof where, "GPU %lld (%s, compute capability %d.%d, %s)", gpu, x->name, x->cc_major,
                         x->cc_minor, x->bus);
                const int cc = x->cc_major * 10 + x->cc_minor;
                cc_differ |= first_cc >= 0 && cc != first_cc;
                if (first_cc < 0)
                    first_cc = cc;
            } else if (cuda) {
                snprintf(where, sizeof where, "GPU %lld: NONE (%d visible)", gpu, n_gpus);
                beyond = 1;
            } else {
                snprintf(where, sizeof where, "GPU %lld", gpu);
            }
        } else {
            snprintf(where, sizeof where, "the host's cores");
        }
        sy_plugin *ap = NULL;
        sy_err aerr = {{0}};
        const char *aspec = spec_of(cfg, "attention");
        char attn[600];
        if (sy_loader_resolve(ld, SY_KIND_ATTN, aspec, dd->device, &host.api, &ap, &aerr)) {
            snprintf(attn, sizeof attn, "attention %s cannot run: %s", aspec, aerr.msg);
            cannot = 1;
        } else {
            snprintf(attn, sizeof attn, "attention %s", ap->desc->name);
            sy_plugin_close(ap);
        }
        printf("  rank %-3d %s: device %s, %s\n", r, where, dd->name, attn);
        sy_plugin_close(dp);
    }
    sy_host_fini(&host);
    if (cc_differ)
        printf("  WARNING: these GPUs differ in compute capability: each rank's attention `auto` picks the kernels "
               "for its own GPU (above); a named [attention] plugin runs only on the GPUs it was built for\n");
    if (beyond) {
        printf("  %s: %d rank%s but %d GPU%s visible: device cuda refuses to start on a rank without its GPU; "
               "run fewer ranks, or check CUDA_VISIBLE_DEVICES\n", asked ? "CANNOT RUN" : "note", ranks,
               ranks == 1 ? "" : "s", n_gpus, n_gpus == 1 ? "" : "s");
        cannot = 1;
    }
    if (shared) {
        printf("  %s: [device] gpu = %lld puts every rank on one GPU: the GPU comm plugins refuse two ranks on one "
               "GPU (nccl; cuda-p2p unless same_device = allow, for tests); leave gpu = -1\n",
               asked ? "CANNOT RUN" : "note", pin);
        cannot = 1;
    }
    return asked && cannot;
}

int sy_cmd_doctor(int argc, char **argv)
{
    sy_cli_common o;
    memset(&o, 0, sizeof o);
    long long tp = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return DOCTOR_OK;
        }
        if (strcmp(argv[i], "--tp") == 0) {
            const char *v = sy_cli_value(argc, argv, &i);
            if (!v || sy_cli_int("--tp", v, 1, MAX_GPUS, &tp))
                return DOCTOR_USAGE;
            continue;
        }
        const int r = sy_cli_common_arg(&o, argc, argv, &i);
        if (r < 0)
            return DOCTOR_USAGE;
        if (r == 0) {
            fprintf(stderr, "switchyard doctor: unknown option \"%s\"\n", argv[i]);
            usage(stderr);
            return DOCTOR_USAGE;
        }
    }
    sy_config *cfg = NULL;
    if (o.config_path) {
        if (sy_cli_load_config(&o, &cfg))
            return DOCTOR_PLUGIN_MISSING;
    } else if (sy_cli_config_without_file(&o, "switchyard doctor", &cfg)) {
        return DOCTOR_USAGE;
    }
    gpu_info gpus[MAX_GPUS];
    const int n_gpus = report_gpus(gpus, MAX_GPUS);

    sy_err err = {{0}};
    sy_loader *ld = NULL;
    int bad = 1, tp_cannot = 0;
    if (sy_loader_from_config(cfg, o.plugin_dirs[0] ? o.plugin_dirs : NULL, NULL, &ld, &err)) {
        fprintf(stderr, "switchyard doctor: %s\n", err.msg);
    } else {
        bad = report_plugins(ld);
        tp_cannot = report_ranks(ld, cfg, (int)tp, gpus, n_gpus);
    }
    sy_loader_free(ld);
    sy_config_free(cfg);

    if (bad) {
        printf("\nverdict: `auto` cannot find a plugin of every kind (exit %d)\n", DOCTOR_PLUGIN_MISSING);
        return DOCTOR_PLUGIN_MISSING;
    }
    if (tp_cannot) {
        printf("\nverdict: --tp %lld cannot run here with this configuration%s (exit %d)\n", tp,
               n_gpus ? "" : "; no usable NVIDIA GPU", DOCTOR_TP_CANNOT);
        return DOCTOR_TP_CANNOT;
    }
    if (tp > 1)
        printf("\n--tp %lld would run here: %lld ranks, each on the device above\n", tp, tp);
    if (n_gpus == 0) {
        printf("\nverdict: no usable NVIDIA GPU; the CPU plugins serve (exit %d)\n", DOCTOR_NO_GPU);
        return DOCTOR_NO_GPU;
    }
    printf("\nverdict: %d NVIDIA GPU%s usable (exit %d)\n", n_gpus, n_gpus > 1 ? "s" : "", DOCTOR_OK);
    return DOCTOR_OK;
}
