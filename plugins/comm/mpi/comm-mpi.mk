# comm/mpi: MPI_COMM_WORLD collectives; built only when configure found mpicc.
if HAVE_MPI
plugin_LTLIBRARIES += plugins/comm/mpi/sy-comm-mpi.la
plugins_comm_mpi_sy_comm_mpi_la_SOURCES = plugins/comm/mpi/comm_mpi.c
plugins_comm_mpi_sy_comm_mpi_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/common/comm $(MPI_CFLAGS)
plugins_comm_mpi_sy_comm_mpi_la_CFLAGS = $(SY_PLUGIN_CFLAGS)
plugins_comm_mpi_sy_comm_mpi_la_LDFLAGS = -module $(SY_PLUGIN_LDFLAGS)
plugins_comm_mpi_sy_comm_mpi_la_LIBADD = $(MPI_LIBS)
endif
