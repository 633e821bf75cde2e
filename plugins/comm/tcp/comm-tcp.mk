# comm/tcp: ranks on any nodes over a full mesh of TCP connections (--nnodes without MPI).
plugin_LTLIBRARIES += plugins/comm/tcp/sy-comm-tcp.la
plugins_comm_tcp_sy_comm_tcp_la_SOURCES = plugins/common/comm/sycomm_args.h plugins/comm/tcp/comm_tcp.c \
	plugins/comm/tcp/tcp_mesh.c plugins/comm/tcp/tcp_mesh.h
plugins_comm_tcp_sy_comm_tcp_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/comm
plugins_comm_tcp_sy_comm_tcp_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_comm_tcp_sy_comm_tcp_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
