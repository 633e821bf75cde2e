# plugins: each plugins/<kind>/<name>/ has a fragment included here
#
# The CPU plugins share kernels through a libtool convenience library
# (plugins/common/cpu/libsykern.la), compiled into each plugin with hidden
# visibility: plugins never link the core or each other.
# Makefile.am does not declare noinst_LTLIBRARIES, so it starts here; if
# another fragment needs one, move this empty assignment into Makefile.am.
noinst_LTLIBRARIES =
include $(srcdir)/plugins/common/cpu/cpu.mk
include $(srcdir)/plugins/device/cpu/device-cpu.mk
include $(srcdir)/plugins/attn/cpu/attn-cpu.mk
include $(srcdir)/plugins/attn/cpu-ref/attn-cpu-ref.mk
include $(srcdir)/plugins/moe/cpu/moe-cpu.mk
include $(srcdir)/plugins/comm/local/comm-local.mk
include $(srcdir)/plugins/comm/shm/comm-shm.mk
include $(srcdir)/plugins/comm/mpi/comm-mpi.mk

# Kernel micro-benchmark (GEMV GB/s, GEMM GFLOP/s against measured bandwidth).
noinst_PROGRAMS += tools/bench_kernels
tools_bench_kernels_SOURCES = tools/bench_kernels.c
tools_bench_kernels_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
tools_bench_kernels_LDADD = plugins/common/cpu/libsykern.la -lm -lpthread
include $(srcdir)/plugins/frontend/http/http.mk
