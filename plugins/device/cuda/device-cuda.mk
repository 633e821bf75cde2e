# device/cuda: one NVIDIA GPU (cuBLAS GEMMs, glue kernels in device_kern.cu).
plugin_LTLIBRARIES += plugins/device/cuda/sy-device-cuda.la
plugins_device_cuda_sy_device_cuda_la_SOURCES = \
	plugins/device/cuda/device_cuda.h \
	plugins/device/cuda/device_cuda.c \
	plugins/device/cuda/device_cuda_ops.c \
	plugins/device/cuda/device_cuda_graph.c \
	plugins/device/cuda/device_cuda_quant.h \
	plugins/device/cuda/device_cuda_quant.c \
	plugins/device/cuda/device_quant.h \
	plugins/device/cuda/device_kern.h \
	plugins/device/cuda/quant_kern.h
plugins_device_cuda_sy_device_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(SY_CUDA_CPPFLAGS) -I$(top_srcdir)/plugins/common/cuda -I$(top_srcdir)/plugins/common/dev
plugins_device_cuda_sy_device_cuda_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_device_cuda_sy_device_cuda_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_device_cuda_sy_device_cuda_la_LIBADD = plugins/device/cuda/device_kern.lo plugins/device/cuda/quant_kern.lo -lcublas \
	$(SY_CUDA_LIBS)
plugins_device_cuda_sy_device_cuda_la_DEPENDENCIES = plugins/device/cuda/device_kern.lo plugins/device/cuda/quant_kern.lo
plugins/device/cuda/device_kern.lo: plugins/device/cuda/device_kern.cu plugins/device/cuda/device_kern.h $(SY_CUDA_HDRS)
	$(AM_V_GEN)arch='$(SY_GENCODE_ALL)'; defs='-I$(top_srcdir)/plugins/device/cuda'; $(SY_NVCC_LO)
CLEANFILES += plugins/device/cuda/device_kern.lo plugins/device/cuda/device_kern.res
plugins/device/cuda/quant_kern.lo: plugins/device/cuda/quant_kern.cu plugins/device/cuda/quant_kern.h \
		plugins/device/cuda/device_quant.h $(SY_CUDA_HDRS)
	$(AM_V_GEN)arch='$(SY_GENCODE_ALL)'; defs='-I$(top_srcdir)/plugins/device/cuda'; $(SY_NVCC_LO)
CLEANFILES += plugins/device/cuda/quant_kern.lo plugins/device/cuda/quant_kern.res
