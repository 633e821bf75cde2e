# Configs. switchyard.ini (installed) points at the installed small model;
# switchyard-build.ini (build tree only) at the one made in the build tree and
# at build-plugins/, so the binary runs without installing.
swconfdir = $(sysconfdir)/switchyard
swconf_DATA = etc/switchyard.ini
swexamplesdir = $(sysconfdir)/switchyard/examples
dist_swexamples_DATA = etc/examples/h200-single.ini etc/examples/sm120-8gpu-pcie.ini etc/examples/cpu-real-model.ini \
	etc/examples/cuda.ini
EXTRA_DIST += etc/switchyard.ini.in
CLEANFILES += etc/switchyard.ini etc/switchyard-build.ini
SY_ALL_LOCAL += etc/switchyard-build.ini models/small/config.json

SY_SMALL_MODEL_INSTALLED = $(pkgdatadir)/models/small

etc/switchyard.ini: $(srcdir)/etc/switchyard.ini.in Makefile
	$(AM_V_GEN)$(MKDIR_P) etc && $(SED) -e 's|@MODEL_DIR@|$(SY_SMALL_MODEL_INSTALLED)|' -e 's|@PLUGIN_PATH@||' \
	  $(srcdir)/etc/switchyard.ini.in > $@.tmp && mv $@.tmp $@

etc/switchyard-build.ini: $(srcdir)/etc/switchyard.ini.in Makefile
	$(AM_V_GEN)$(MKDIR_P) etc && $(SED) -e 's|@MODEL_DIR@|$(abs_top_builddir)/models/small|' \
	  -e 's|@PLUGIN_PATH@|$(abs_top_builddir)/build-plugins|' $(srcdir)/etc/switchyard.ini.in > $@.tmp && mv $@.tmp $@

# The default model: generated, never downloaded, so every machine has it.
models/small/config.json: sy-mkmodel$(EXEEXT)
	$(AM_V_GEN)rm -rf models/small && ./sy-mkmodel$(EXEEXT) --preset small --out models/small >/dev/null

install-data-local: models/small/config.json
	$(MKDIR_P) $(DESTDIR)$(SY_SMALL_MODEL_INSTALLED)
	$(INSTALL_DATA) models/small/* $(DESTDIR)$(SY_SMALL_MODEL_INSTALLED)/

uninstall-local:
	rm -rf $(DESTDIR)$(SY_SMALL_MODEL_INSTALLED)

