# moe/cuda: the portable GPU mixture of experts. Routing is the CPU plugin's
# moe_route.c compiled in again (one definition of expert selection), and
# the tuning tables' reader is plugins/common/moe/sytune.c.
plugin_LTLIBRARIES += plugins/moe/cuda/sy-moe-cuda.la
plugins_moe_cuda_sy_moe_cuda_la_SOURCES = \
	plugins/moe/cuda/moe_cuda.c \
	plugins/moe/cuda/moe_kern.h \
	plugins/moe/cuda/moe_tiles.h \
	plugins/moe/cuda/moe_tiles.c \
	plugins/common/moe/sytune.h \
	plugins/common/moe/symoe_range.h \
	plugins/common/moe/sytune.c \
	plugins/moe/cpu/moe_route.c
plugins_moe_cuda_sy_moe_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS) -I$(top_srcdir)/plugins/common/cuda \
	-I$(top_srcdir)/plugins/common/cpu -I$(top_srcdir)/plugins/common/moe -I$(top_srcdir)/plugins/moe/cpu \
	-DSY_MOE_TUNING_DIR='"$(pkgdatadir)/moe-tuning"' -DSY_MOE_TUNING_SRCDIR='"$(abs_top_srcdir)/etc/moe-tuning"'
plugins_moe_cuda_sy_moe_cuda_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_moe_cuda_sy_moe_cuda_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_moe_cuda_sy_moe_cuda_la_LIBADD = plugins/moe/cuda/moe_kern.lo plugins/common/cpu/libsykern.la $(SY_CUDA_LIBS) -lm
plugins_moe_cuda_sy_moe_cuda_la_DEPENDENCIES = plugins/moe/cuda/moe_kern.lo plugins/common/cpu/libsykern.la
plugins/moe/cuda/moe_kern.lo: plugins/moe/cuda/moe_kern.cu plugins/moe/cuda/moe_kern.h $(SY_CUDA_HDRS)
	$(AM_V_GEN)arch='$(SY_GENCODE_ALL)'; defs='-I$(top_srcdir)/plugins/moe/cuda'; $(SY_NVCC_LO)
CLEANFILES += plugins/moe/cuda/moe_kern.lo plugins/moe/cuda/moe_kern.res
