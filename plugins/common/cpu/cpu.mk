# libsykern: CPU kernels shared by the cpu plugins (and their tests and
# tools/bench_kernels). The ISA-specific files select their target with
# #pragma GCC target, so no per-file flags are needed here.
noinst_LTLIBRARIES += plugins/common/cpu/libsykern.la
plugins_common_cpu_libsykern_la_SOURCES = \
	plugins/common/cpu/sykern.h \
	plugins/common/cpu/sykargmax.h \
	plugins/common/cpu/syksample.h \
	plugins/common/cpu/sykconv.h \
	plugins/common/cpu/sykpool.h \
	plugins/common/cpu/sykattn.h \
	plugins/common/cpu/attn_check.c \
	plugins/common/cpu/isa.c \
	plugins/common/cpu/pool.c \
	plugins/common/cpu/util.c \
	plugins/common/cpu/gemm.c \
	plugins/common/cpu/elementwise.c \
	plugins/common/cpu/kern_portable.c \
	plugins/common/cpu/kern_avx2.c \
	plugins/common/cpu/kern_avx512.c \
	plugins/common/cpu/kern_avx512bf16.c \
	plugins/common/cpu/kern_amx.c \
	plugins/common/cpu/peak.c \
	plugins/common/cpu/sykmatmul.h \
	plugins/common/cpu/matmul_choice.c \
	plugins/common/cpu/sykquant.h \
	plugins/common/cpu/gemm_quant.c \
	plugins/common/cpu/quant_portable.c \
	plugins/common/cpu/quant_avx2.c \
	plugins/common/cpu/quant_avx512.c
plugins_common_cpu_libsykern_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/dev
plugins_common_cpu_libsykern_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
EXTRA_DIST += plugins/common/cpu/README.md
