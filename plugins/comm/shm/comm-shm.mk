# comm/shm: ranks of one node over POSIX shared memory (shm_open, C11 atomics).
plugin_LTLIBRARIES += plugins/comm/shm/sy-comm-shm.la
plugins_comm_shm_sy_comm_shm_la_SOURCES = plugins/common/comm/sycomm_args.h plugins/comm/shm/comm_shm.c \
	plugins/comm/shm/shm_seg.c plugins/comm/shm/shm_seg.h
plugins_comm_shm_sy_comm_shm_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/comm
plugins_comm_shm_sy_comm_shm_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_comm_shm_sy_comm_shm_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_comm_shm_sy_comm_shm_la_LIBADD = -lrt
