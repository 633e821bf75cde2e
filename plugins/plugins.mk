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
include $(srcdir)/plugins/comm/tcp/comm-tcp.mk
include $(srcdir)/plugins/common/cuda/dist.mk
if HAVE_CUDA
include $(srcdir)/plugins/common/cuda/cuda.mk
include $(srcdir)/plugins/device/cuda/device-cuda.mk
include $(srcdir)/plugins/attn/cuda/attn-cuda.mk
include $(srcdir)/plugins/moe/cuda/moe-cuda.mk
include $(srcdir)/plugins/comm/cuda-p2p/comm-cuda-p2p.mk
if HAVE_NCCL
include $(srcdir)/plugins/comm/nccl/comm-nccl.mk
endif
endif

# Kernel micro-benchmark (GEMV GB/s, GEMM GFLOP/s against measured bandwidth).
noinst_PROGRAMS += tools/bench_kernels
tools_bench_kernels_SOURCES = tools/bench_kernels.c
tools_bench_kernels_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
tools_bench_kernels_LDADD = plugins/common/cpu/libsykern.la -lm -lpthread
include $(srcdir)/plugins/frontend/http/http.mk
