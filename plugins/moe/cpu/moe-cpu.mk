# moe/cpu: routing and grouped expert GEMMs on the host.
plugin_LTLIBRARIES += plugins/moe/cpu/sy-moe-cpu.la
plugins_moe_cpu_sy_moe_cpu_la_SOURCES = \
	plugins/moe/cpu/moe_cpu.h \
	plugins/moe/cpu/moe_cpu.c \
	plugins/moe/cpu/moe_route.c \
	plugins/moe/cpu/moe_cpu_fwd.c \
	plugins/moe/cpu/moe_tune.h \
	plugins/moe/cpu/moe_tune.c \
	plugins/common/moe/sytune.h \
	plugins/common/moe/symoe_bias.h \
	plugins/common/moe/symoe_range.h \
	plugins/common/moe/symoe_route.h \
	plugins/common/moe/symoe_fp4act.h \
	plugins/common/moe/sytune.c
plugins_moe_cpu_sy_moe_cpu_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/cpu -I$(top_srcdir)/plugins/common/moe \
	-DSY_MOE_TUNING_DIR='"$(pkgdatadir)/moe-tuning"' -DSY_MOE_TUNING_SRCDIR='"$(abs_top_srcdir)/etc/moe-tuning"'
plugins_moe_cpu_sy_moe_cpu_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_moe_cpu_sy_moe_cpu_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_moe_cpu_sy_moe_cpu_la_LIBADD = plugins/common/cpu/libsykern.la -lm

# The tuning tables (moe_tune.h) install under $(pkgdatadir)/moe-tuning, the
# default of the plugin's tuning_dir key.
EXTRA_DIST += etc/moe-tuning
install-data-hook:
	$(MKDIR_P) $(DESTDIR)$(pkgdatadir)/moe-tuning
	cp -R $(srcdir)/etc/moe-tuning/. $(DESTDIR)$(pkgdatadir)/moe-tuning/
	chmod -R u+w $(DESTDIR)$(pkgdatadir)/moe-tuning
uninstall-hook:
	rm -rf $(DESTDIR)$(pkgdatadir)/moe-tuning
