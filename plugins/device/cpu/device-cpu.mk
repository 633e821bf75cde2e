# device/cpu: memory, the worker pool and the glue ops.
plugin_LTLIBRARIES += plugins/device/cpu/sy-device-cpu.la
plugins_device_cpu_sy_device_cpu_la_SOURCES = \
	plugins/device/cpu/device_cpu.h \
	plugins/device/cpu/device_cpu.c \
	plugins/device/cpu/device_ops.c \
	plugins/device/cpu/device_argmax.c \
	plugins/device/cpu/device_sample.c \
	plugins/common/dev/sydev_args.h
plugins_device_cpu_sy_device_cpu_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu -I$(top_srcdir)/plugins/common/dev
plugins_device_cpu_sy_device_cpu_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_device_cpu_sy_device_cpu_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_device_cpu_sy_device_cpu_la_LIBADD = plugins/common/cpu/libsykern.la -lm -lpthread
