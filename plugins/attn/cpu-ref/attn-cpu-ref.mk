# attn/cpu-ref: the plain, single-threaded reference attention.
plugin_LTLIBRARIES += plugins/attn/cpu-ref/sy-attn-cpu-ref.la
plugins_attn_cpu_ref_sy_attn_cpu_ref_la_SOURCES = plugins/attn/cpu-ref/attn_cpu_ref.c
plugins_attn_cpu_ref_sy_attn_cpu_ref_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu
plugins_attn_cpu_ref_sy_attn_cpu_ref_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_attn_cpu_ref_sy_attn_cpu_ref_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_attn_cpu_ref_sy_attn_cpu_ref_la_LIBADD = plugins/common/cpu/libsykern.la -lm
