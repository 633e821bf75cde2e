# moe/cpu: routing and grouped expert GEMMs on the host.
plugin_LTLIBRARIES += plugins/moe/cpu/sy-moe-cpu.la
plugins_moe_cpu_sy_moe_cpu_la_SOURCES = \
	plugins/moe/cpu/moe_cpu.h \
	plugins/moe/cpu/moe_cpu.c \
	plugins/moe/cpu/moe_route.c \
	plugins/moe/cpu/moe_cpu_fwd.c
plugins_moe_cpu_sy_moe_cpu_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
plugins_moe_cpu_sy_moe_cpu_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_moe_cpu_sy_moe_cpu_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_moe_cpu_sy_moe_cpu_la_LIBADD = plugins/common/cpu/libsykern.la -lm
