# comm/local: tensor_parallel = 1.
plugin_LTLIBRARIES += plugins/comm/local/sy-comm-local.la
plugins_comm_local_sy_comm_local_la_SOURCES = plugins/comm/local/comm_local.c
plugins_comm_local_sy_comm_local_la_CPPFLAGS = $(AM_CPPFLAGS)
plugins_comm_local_sy_comm_local_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_comm_local_sy_comm_local_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
