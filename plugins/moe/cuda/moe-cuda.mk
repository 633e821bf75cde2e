# moe/cuda: the portable GPU mixture of experts. Host routing is the CPU
# plugin's moe_route.c compiled in again; both it and the routing kernel run
# plugins/common/moe/symoe_route.h (one definition of expert selection), and
# the tuning tables' reader is plugins/common/moe/sytune.c.
plugin_LTLIBRARIES += plugins/moe/cuda/sy-moe-cuda.la
plugins_moe_cuda_sy_moe_cuda_la_SOURCES = \
	plugins/moe/cuda/moe_cuda.c \
	plugins/moe/cuda/moe_kern.h \
	plugins/moe/cuda/moe_route_dev.h \
	plugins/moe/cuda/moe_tiles.h \
	plugins/moe/cuda/moe_tiles.c \
	plugins/moe/cuda/moe_fp4_frag.h \
	plugins/common/moe/symoe_fp4act.h \
	plugins/common/moe/sytune.h \
	plugins/common/moe/symoe_bias.h \
	plugins/common/moe/symoe_range.h \
	plugins/common/moe/symoe_route.h \
	plugins/common/moe/sytune.c \
	plugins/moe/cpu/moe_route.c
plugins_moe_cuda_sy_moe_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(SY_CUDA_CPPFLAGS) -I$(top_srcdir)/plugins/common/cuda \
	-I$(top_srcdir)/plugins/common/cpu -I$(top_srcdir)/plugins/common/moe -I$(top_srcdir)/plugins/moe/cpu \
	-DSY_MOE_TUNING_DIR='"$(pkgdatadir)/moe-tuning"' -DSY_MOE_TUNING_SRCDIR='"$(abs_top_srcdir)/etc/moe-tuning"'
plugins_moe_cuda_sy_moe_cuda_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_moe_cuda_sy_moe_cuda_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_moe_cuda_sy_moe_cuda_la_LIBADD = plugins/moe/cuda/moe_kern.lo plugins/moe/cuda/moe_wgmma.lo \
	plugins/moe/cuda/moe_fp4.lo plugins/common/cpu/libsykern.la $(SY_CUDA_LIBS) -lm
plugins_moe_cuda_sy_moe_cuda_la_DEPENDENCIES = plugins/moe/cuda/moe_kern.lo plugins/moe/cuda/moe_wgmma.lo \
	plugins/moe/cuda/moe_fp4.lo plugins/common/cpu/libsykern.la
# FP8 / NVFP4 experts are decoded by device/cuda's decoders (device_quant.h), one definition for both plugins.
plugins/moe/cuda/moe_kern.lo: plugins/moe/cuda/moe_kern.cu plugins/moe/cuda/moe_kern.h plugins/moe/cuda/moe_route_dev.h \
		plugins/moe/cuda/moe_tc.cuh plugins/device/cuda/device_quant.h plugins/common/moe/symoe_route.h \
		plugins/common/moe/symoe_fp4act.h $(SY_CUDA_HDRS)
	$(AM_V_GEN)arch='$(SY_GENCODE_ALL)'; defs='-I$(top_srcdir)/plugins/moe/cuda -I$(top_srcdir)/plugins/device/cuda -I$(top_srcdir)/plugins/common/moe'; $(SY_NVCC_LO)
# The wgmma tiles: Hopper's arch-specific sm_90a code and nothing else (their own module, so no other GPU
# loads an image of them; the fmaf and mma.sync tiles above carry sm_80/90/120 code).
SY_GENCODE_SM90A = -gencode arch=compute_90a,code=sm_90a
plugins/moe/cuda/moe_wgmma.lo: plugins/moe/cuda/moe_wgmma.cu plugins/moe/cuda/moe_kern.h plugins/moe/cuda/moe_tc.cuh \
		plugins/device/cuda/device_quant.h $(SY_CUDA_HDRS)
	$(AM_V_GEN)arch='$(SY_GENCODE_SM90A)'; defs='-I$(top_srcdir)/plugins/moe/cuda -I$(top_srcdir)/plugins/device/cuda -I$(top_srcdir)/plugins/common/moe'; $(SY_NVCC_LO)
# The block-scaled FP4 tiles: mma.sync kind::mxf4nvf4 exists on sm_120a (and sm_121a / sm_120f) only; an
# sm_120a image runs on compute capability 12.0 alone, like the wgmma module on 9.0.
SY_GENCODE_SM120A = -gencode arch=compute_120a,code=sm_120a
plugins/moe/cuda/moe_fp4.lo: plugins/moe/cuda/moe_fp4.cu plugins/moe/cuda/moe_kern.h plugins/moe/cuda/moe_fp4_frag.h \
		plugins/device/cuda/device_quant.h $(SY_CUDA_HDRS)
	$(AM_V_GEN)arch='$(SY_GENCODE_SM120A)'; defs='-I$(top_srcdir)/plugins/moe/cuda -I$(top_srcdir)/plugins/device/cuda -I$(top_srcdir)/plugins/common/moe'; $(SY_NVCC_LO)
CLEANFILES += plugins/moe/cuda/moe_kern.lo plugins/moe/cuda/moe_kern.res plugins/moe/cuda/moe_wgmma.lo \
	plugins/moe/cuda/moe_wgmma.res plugins/moe/cuda/moe_fp4.lo plugins/moe/cuda/moe_fp4.res
