# comm/cuda-p2p: one-node GPU collectives over CUDA IPC; the rendezvous and
# host barriers are comm/shm's shared segment (shm_seg.c compiled in).
plugin_LTLIBRARIES += plugins/comm/cuda-p2p/sy-comm-cuda-p2p.la
plugins_comm_cuda_p2p_sy_comm_cuda_p2p_la_SOURCES = plugins/comm/cuda-p2p/comm_p2p.c \
	plugins/comm/cuda-p2p/p2p_kern.h plugins/comm/shm/shm_seg.c plugins/comm/shm/shm_seg.h
plugins_comm_cuda_p2p_sy_comm_cuda_p2p_la_CPPFLAGS = $(AM_CPPFLAGS) $(SY_CUDA_CPPFLAGS) \
	-I$(top_srcdir)/plugins/common/cuda -I$(top_srcdir)/plugins/comm/shm -I$(top_srcdir)/plugins/common/comm
plugins_comm_cuda_p2p_sy_comm_cuda_p2p_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_comm_cuda_p2p_sy_comm_cuda_p2p_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_comm_cuda_p2p_sy_comm_cuda_p2p_la_LIBADD = plugins/comm/cuda-p2p/p2p_kern.lo $(SY_CUDA_LIBS) -lrt
plugins_comm_cuda_p2p_sy_comm_cuda_p2p_la_DEPENDENCIES = plugins/comm/cuda-p2p/p2p_kern.lo
plugins/comm/cuda-p2p/p2p_kern.lo: plugins/comm/cuda-p2p/p2p_kern.cu plugins/comm/cuda-p2p/p2p_kern.h
	$(AM_V_GEN)arch='$(SY_GENCODE_ALL)'; defs='-I$(top_srcdir)/plugins/comm/cuda-p2p'; $(SY_NVCC_LO)
CLEANFILES += plugins/comm/cuda-p2p/p2p_kern.lo plugins/comm/cuda-p2p/p2p_kern.res
