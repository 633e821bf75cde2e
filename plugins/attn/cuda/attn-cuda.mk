# attn/cuda-sm80, cuda-sm90, cuda-sm120: one glue source and one kernel
# source (attn_kern.cuh), built three times with the variant's tile
# (attn_tiles.h); each variant's kernels only for its own architecture, so
# the shared-memory check holds each to its own limit.
# attn_plan.{h,c}: the tensor-core prefill path's host-side plan, masks and fragment maps (the kernel includes the
# header; tests/gpu/test_attn_cuda_plan runs it on any build); attn_tc_check.{h,c}: its self-check at prepare.
SY_ATTN_CUDA_SRC = plugins/attn/cuda/attn_cuda.c plugins/attn/cuda/attn_kern.h plugins/attn/cuda/attn_tiles.h \
	plugins/attn/cuda/attn_plan.h plugins/attn/cuda/attn_plan.c plugins/attn/cuda/attn_tc_check.h \
	plugins/attn/cuda/attn_tc_check.c
SY_ATTN_CUDA_DEPS = $(top_srcdir)/plugins/attn/cuda/attn_kern.cuh $(top_srcdir)/plugins/attn/cuda/attn_kern.h \
	$(top_srcdir)/plugins/attn/cuda/attn_tiles.h $(top_srcdir)/plugins/attn/cuda/attn_plan.h $(SY_CUDA_HDRS)
SY_ATTN_CUDA_CPPFLAGS = $(AM_CPPFLAGS) $(SY_CUDA_CPPFLAGS) -I$(top_srcdir)/plugins/common/cuda \
	-I$(top_srcdir)/plugins/common/cpu -I$(top_srcdir)/plugins/attn/cuda
SY_ATTN_CUDA_LIBADD = plugins/common/cpu/libsykern.la $(SY_CUDA_LIBS) -lm

plugin_LTLIBRARIES += plugins/attn/cuda/sy-attn-cuda-sm80.la
plugins_attn_cuda_sy_attn_cuda_sm80_la_SOURCES = $(SY_ATTN_CUDA_SRC)
plugins_attn_cuda_sy_attn_cuda_sm80_la_CPPFLAGS = $(SY_ATTN_CUDA_CPPFLAGS) -DSY_ATTN_SM=80
plugins_attn_cuda_sy_attn_cuda_sm80_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_attn_cuda_sy_attn_cuda_sm80_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_attn_cuda_sy_attn_cuda_sm80_la_LIBADD = plugins/attn/cuda/attn_sm80.lo $(SY_ATTN_CUDA_LIBADD)
plugins_attn_cuda_sy_attn_cuda_sm80_la_DEPENDENCIES = plugins/attn/cuda/attn_sm80.lo plugins/common/cpu/libsykern.la
plugins/attn/cuda/attn_sm80.lo: plugins/attn/cuda/attn_sm80.cu $(SY_ATTN_CUDA_DEPS)
	$(AM_V_GEN)arch='$(SY_GENCODE_SM80)'; defs='-I$(top_srcdir)/plugins/attn/cuda'; $(SY_NVCC_LO)

plugin_LTLIBRARIES += plugins/attn/cuda/sy-attn-cuda-sm90.la
plugins_attn_cuda_sy_attn_cuda_sm90_la_SOURCES = $(SY_ATTN_CUDA_SRC)
plugins_attn_cuda_sy_attn_cuda_sm90_la_CPPFLAGS = $(SY_ATTN_CUDA_CPPFLAGS) -DSY_ATTN_SM=90
plugins_attn_cuda_sy_attn_cuda_sm90_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_attn_cuda_sy_attn_cuda_sm90_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_attn_cuda_sy_attn_cuda_sm90_la_LIBADD = plugins/attn/cuda/attn_sm90.lo $(SY_ATTN_CUDA_LIBADD)
plugins_attn_cuda_sy_attn_cuda_sm90_la_DEPENDENCIES = plugins/attn/cuda/attn_sm90.lo plugins/common/cpu/libsykern.la
plugins/attn/cuda/attn_sm90.lo: plugins/attn/cuda/attn_sm90.cu $(SY_ATTN_CUDA_DEPS)
	$(AM_V_GEN)arch='$(SY_GENCODE_SM90)'; defs='-I$(top_srcdir)/plugins/attn/cuda'; $(SY_NVCC_LO)

plugin_LTLIBRARIES += plugins/attn/cuda/sy-attn-cuda-sm120.la
plugins_attn_cuda_sy_attn_cuda_sm120_la_SOURCES = $(SY_ATTN_CUDA_SRC)
plugins_attn_cuda_sy_attn_cuda_sm120_la_CPPFLAGS = $(SY_ATTN_CUDA_CPPFLAGS) -DSY_ATTN_SM=120
plugins_attn_cuda_sy_attn_cuda_sm120_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_attn_cuda_sy_attn_cuda_sm120_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_attn_cuda_sy_attn_cuda_sm120_la_LIBADD = plugins/attn/cuda/attn_sm120.lo $(SY_ATTN_CUDA_LIBADD)
plugins_attn_cuda_sy_attn_cuda_sm120_la_DEPENDENCIES = plugins/attn/cuda/attn_sm120.lo plugins/common/cpu/libsykern.la
plugins/attn/cuda/attn_sm120.lo: plugins/attn/cuda/attn_sm120.cu $(SY_ATTN_CUDA_DEPS)
	$(AM_V_GEN)arch='$(SY_GENCODE_SM120)'; defs='-I$(top_srcdir)/plugins/attn/cuda'; $(SY_NVCC_LO)

CLEANFILES += plugins/attn/cuda/attn_sm80.lo plugins/attn/cuda/attn_sm90.lo plugins/attn/cuda/attn_sm120.lo \
	plugins/attn/cuda/attn_sm80.res plugins/attn/cuda/attn_sm90.res plugins/attn/cuda/attn_sm120.res
