# comm/nccl: NCCL collectives (built when configure finds nccl.h: HAVE_NCCL).
plugin_LTLIBRARIES += plugins/comm/nccl/sy-comm-nccl.la
plugins_comm_nccl_sy_comm_nccl_la_SOURCES = plugins/comm/nccl/comm_nccl.c
plugins_comm_nccl_sy_comm_nccl_la_CPPFLAGS = $(AM_CPPFLAGS) $(SY_CUDA_CPPFLAGS) -I$(top_srcdir)/plugins/common/cuda \
	-I$(top_srcdir)/plugins/common/comm
plugins_comm_nccl_sy_comm_nccl_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_comm_nccl_sy_comm_nccl_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_comm_nccl_sy_comm_nccl_la_LIBADD = -lnccl $(CUDA_LIBS)
