/*
 * The five cpu plugins as shared objects: each exports exactly one dynamic
 * symbol (sy_plugin_v1, read from the ELF .dynsym), has a sane descriptor
 * (ABI, kind, name, device, key declarations, required ops), probes > 0
 * here, creates with its declared defaults and refuses bad key values. And
 * comm/local's semantics: rank 0 of 1, no-op collectives, allgather copies.
 */
#include "config.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cpu_harness.h"

static th_host host;

/* Names of the defined global dynamic symbols of an ELF64 file. */
static int exported(const char *path, char names[][64], int max)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len);
    int n = -1;
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
        goto out;
    const Elf64_Ehdr *eh = (const void *)buf;
    if (len < (long)sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64)
        goto out;
    const Elf64_Shdr *sh = (const void *)(buf + eh->e_shoff);
    n = 0;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const Elf64_Sym *sym = (const void *)(buf + sh[i].sh_offset);
        const char *str = (const char *)(buf + sh[sh[i].sh_link].sh_offset);
        const size_t count = sh[i].sh_size / sizeof(Elf64_Sym);
        for (size_t s = 0; s < count; s++) {
            const int bind = ELF64_ST_BIND(sym[s].st_info), type = ELF64_ST_TYPE(sym[s].st_info);
            if (sym[s].st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK) ||
                (type != STT_FUNC && type != STT_OBJECT && type != STT_NOTYPE && type != STT_TLS))
                continue;
            if (n < max)
                snprintf(names[n], 64, "%s", str + sym[s].st_name);
            n++;
        }
    }
out:
    free(buf);
    fclose(f);
    return n;
}

static void check_plugin(const char *base, int kind, const char *name, const char *device)
{
    th_plugin p;
    th_load(base, &p);
    const sy_plugin_desc *d = p.desc;
    char names[16][64];
    const int n = exported(p.path, names, 16);
    TH_CHECK(n == 1 && strcmp(names[0], SY_PLUGIN_ENTRY_NAME) == 0, "%s exports %d symbols (first: %s), want only %s",
             base, n, n > 0 ? names[0] : "-", SY_PLUGIN_ENTRY_NAME);
    for (int i = 1; i < n && i < 16; i++)
        fprintf(stderr, "  %s also exports %s\n", base, names[i]);
    TH_CHECK(d->struct_size >= sizeof(sy_plugin_desc) && d->abi_major == SY_ABI_MAJOR && d->abi_minor <= SY_ABI_MINOR,
             "%s: descriptor size/ABI", base);
    TH_CHECK(d->kind == kind && strcmp(d->name, name) == 0, "%s: kind %d name %s", base, d->kind, d->name);
    TH_CHECK((device == NULL && d->device == NULL) || (device && d->device && strcmp(d->device, device) == 0),
             "%s: device %s, want %s", base, d->device ? d->device : "(any)", device ? device : "(any)");
    TH_CHECK(d->version && d->description && d->probe && d->create && d->destroy && d->ops, "%s: missing fields", base);
    TH_CHECK(*(const uint32_t *)d->ops >= 8, "%s: ops struct_size", base);
    for (const sy_key_decl *k = d->keys; k && k->name; k++) {
        TH_CHECK(k->help && *k->help, "%s key %s has no help", base, k->name);
        TH_CHECK(k->default_value != NULL, "%s key %s should have a default", base, k->name);
        if (k->type == SY_KEY_ENUM) {
            TH_CHECK(k->choices && strstr(k->choices, k->default_value), "%s key %s: default %s not in %s", base,
                     k->name, k->default_value, k->choices ? k->choices : "?");
            const char *kv[] = {k->name, "no-such-choice", NULL};
            void *inst = NULL;
            sy_err err;
            TH_CHECK(th_create(&p, &host.api, kv, &inst, &err) != SY_OK && !inst, "%s: %s = no-such-choice accepted",
                     base, k->name);
        }
    }
    sy_err why;
    why.msg[0] = 0;
    TH_CHECK(d->probe(&host.api, &why) > 0, "%s: probe 0 here (%s)", base, why.msg);
    void *inst = NULL;
    sy_err err;
    TH_CHECK(th_create(&p, &host.api, NULL, &inst, &err) == SY_OK && inst, "%s: create with defaults: %s", base,
             err.msg);
    if (inst)
        d->destroy(inst);
    d->destroy(NULL); /* harmless */
    th_unload(&p);
}

static void check_comm_local(void)
{
    th_plugin p;
    th_load("sy-comm-local", &p);
    const sy_comm_ops *o = p.desc->ops;
    void *c = NULL;
    sy_err err;
    if (th_create(&p, &host.api, NULL, &c, &err)) {
        TH_CHECK(0, "comm local create: %s", err.msg);
        return;
    }
    TH_CHECK(o->rank(c) == 0 && o->size(c) == 1, "comm local: rank %d size %d", o->rank(c), o->size(c));
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {0};
    sy_tensor ta = sy_tensor_2d(a, SY_DTYPE_F32, 2, 3), tb = sy_tensor_2d(b, SY_DTYPE_F32, 2, 3);
    TH_CHECK(o->allreduce_sum(c, &ta, &err) == SY_OK && a[0] == 1 && a[5] == 6, "allreduce_sum changed the data");
    TH_CHECK(o->allgather(c, &ta, &tb, &err) == SY_OK && memcmp(a, b, sizeof a) == 0, "allgather did not copy");
    sy_tensor wrong = sy_tensor_2d(b, SY_DTYPE_F32, 3, 3);
    TH_CHECK(o->allgather(c, &ta, &wrong, &err) == SY_ERR_INVALID && strstr(err.msg, "allgather"),
             "allgather into a bigger tensor accepted");
    sy_tensor dev_mem = tb;
    dev_mem.device = 1;
    TH_CHECK(o->allgather(c, &ta, &dev_mem, &err) == SY_ERR_UNSUPPORTED, "allgather into device memory accepted");
    TH_CHECK(o->broadcast(c, a, sizeof a, 0, &err) == SY_OK && a[2] == 3, "broadcast from 0");
    TH_CHECK(o->broadcast(c, a, sizeof a, 1, &err) == SY_ERR_INVALID, "broadcast from rank 1 of 1 accepted");
    TH_CHECK(o->barrier(c, &err) == SY_OK, "barrier");
    sy_tensor half = ta;
    half.dtype = SY_DTYPE_BF16;
    TH_CHECK(o->allreduce_sum(c, &half, &err) == SY_ERR_INVALID, "allreduce_sum of BF16 accepted");
    p.desc->destroy(c);
    th_unload(&p);
}

int main(void)
{
    th_host_init(&host);
    check_plugin("sy-device-cpu", SY_KIND_DEVICE, "cpu", "cpu");
    check_plugin("sy-attn-cpu", SY_KIND_ATTN, "cpu", "cpu");
    check_plugin("sy-attn-cpu-ref", SY_KIND_ATTN, "cpu-ref", "cpu");
    check_plugin("sy-moe-cpu", SY_KIND_MOE, "cpu", "cpu");
    check_plugin("sy-comm-local", SY_KIND_COMM, "local", NULL);
    check_comm_local();

    /* threads bounds and an explicit count */
    th_plugin d;
    th_load("sy-device-cpu", &d);
    const char *kv[] = {"threads", "2", NULL};
    void *inst = NULL;
    sy_err err;
    TH_CHECK(th_create(&d, &host.api, kv, &inst, &err) == SY_OK, "threads = 2: %s", err.msg);
    if (inst) {
        void *f = d.desc->get_proc("n_workers");
        sy_device_n_workers_fn nw;
        memcpy(&nw, &f, sizeof f);
        TH_CHECK(f && nw(inst) == 2, "threads = 2 gives %d workers", f ? nw(inst) : -1);
        d.desc->destroy(inst);
    }
    const char *neg[] = {"threads", "-1", NULL};
    inst = NULL;
    TH_CHECK(th_create(&d, &host.api, neg, &inst, &err) == SY_ERR_INVALID && !inst, "threads = -1 accepted");
    th_unload(&d);
    TH_CHECK(atomic_load(&host.live_allocs) == 0, "%ld host allocations leaked", atomic_load(&host.live_allocs));
    return th_done("test_cpu_plugins");
}
