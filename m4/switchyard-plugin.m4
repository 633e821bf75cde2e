# switchyard-plugin.m4: find the switchyard plugin SDK from a plugin's configure.
#
# SWITCHYARD_PLUGIN([MIN-VERSION], [ACTION-IF-FOUND], [ACTION-IF-NOT-FOUND])
#
# Looks up switchyard-plugin.pc with pkg-config (PKG_CHECK_MODULES, so
# pkg.m4 must be available to aclocal) and substitutes:
#   SWITCHYARD_PLUGIN_CFLAGS  everything a plugin's compile line needs
#                             (include dir, -fPIC, -fvisibility=hidden)
#   SWITCHYARD_PLUGIN_LIBS    empty: a plugin links neither the core nor
#                             other plugins
#   SWITCHYARD_PLUGINDIR      where the installed switchyard looks for plugins
#                             (override with --with-switchyard-plugindir=DIR)
# Without ACTION-IF-NOT-FOUND, a missing SDK stops configure with a message
# naming the package to install and PKG_CONFIG_PATH.
#
# Example configure.ac:
#   AC_INIT([myattn], [1.0])
#   AM_INIT_AUTOMAKE([foreign])
#   AC_PROG_CC
#   LT_INIT([disable-static])
#   SWITCHYARD_PLUGIN([0.1])
# and Makefile.am:
#   plugin_LTLIBRARIES = myattn.la
#   plugindir = $(SWITCHYARD_PLUGINDIR)
#   myattn_la_CFLAGS = $(SWITCHYARD_PLUGIN_CFLAGS)
#   myattn_la_LDFLAGS = -module -avoid-version -shared

# serial 1

AC_DEFUN([SWITCHYARD_PLUGIN], [
  AC_REQUIRE([PKG_PROG_PKG_CONFIG])
  m4_ifval([$1], [sy_plugin_req="switchyard-plugin >= $1"], [sy_plugin_req="switchyard-plugin"])
  dnl The prefix is not this macro's name: PKG_CHECK_MODULES rescans it, and
  dnl SWITCHYARD_PLUGIN would expand again, forever.
  PKG_CHECK_MODULES([SY_PLUGIN_SDK], [$sy_plugin_req], [sy_plugin_found=yes], [sy_plugin_found=no])
  SWITCHYARD_PLUGIN_CFLAGS=$SY_PLUGIN_SDK_CFLAGS
  SWITCHYARD_PLUGIN_LIBS=$SY_PLUGIN_SDK_LIBS
  AC_SUBST([SWITCHYARD_PLUGIN_CFLAGS])
  AC_SUBST([SWITCHYARD_PLUGIN_LIBS])
  AC_ARG_WITH([switchyard-plugindir],
    [AS_HELP_STRING([--with-switchyard-plugindir=DIR],
                    [install the plugin into DIR (default: the installed switchyard's plugin dir)])],
    [SWITCHYARD_PLUGINDIR=$withval],
    [AS_IF([test "$sy_plugin_found" = yes],
           [SWITCHYARD_PLUGINDIR=`$PKG_CONFIG --variable=plugindir switchyard-plugin`])])
  AC_SUBST([SWITCHYARD_PLUGINDIR])
  AS_IF([test "$sy_plugin_found" = yes], [$2],
        [m4_default([$3], [AC_MSG_ERROR([$SY_PLUGIN_SDK_PKG_ERRORS
The switchyard plugin SDK ($sy_plugin_req) was not found: install switchyard (it
installs switchyard/plugin.h and switchyard-plugin.pc), or set PKG_CONFIG_PATH
to the lib/pkgconfig directory of its installation.])])])
])
