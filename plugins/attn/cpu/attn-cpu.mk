# attn/cpu: paged flash-style attention on the host.
plugin_LTLIBRARIES += plugins/attn/cpu/sy-attn-cpu.la
plugins_attn_cpu_sy_attn_cpu_la_SOURCES = \
	plugins/attn/cpu/attn_cpu.h \
	plugins/attn/cpu/attn_cpu.c \
	plugins/attn/cpu/attn_cpu_fwd.c
plugins_attn_cpu_sy_attn_cpu_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
plugins_attn_cpu_sy_attn_cpu_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_attn_cpu_sy_attn_cpu_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_attn_cpu_sy_attn_cpu_la_LIBADD = plugins/common/cpu/libsykern.la -lm
