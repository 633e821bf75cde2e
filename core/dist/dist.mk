# Tensor parallelism across processes: the step-plan wire format and its
# transport (plan.c), starting the ranks of one node (launch.c) and the
# multi-node rendezvous at --dist-addr (rendezvous.c), over the socket I/O of
# sockio.c.
libsycore_a_SOURCES += \
	core/dist/plan.c core/dist/plan.h \
	core/dist/launch.c core/dist/launch.h \
	core/dist/rendezvous.c core/dist/rendezvous.h \
	core/dist/sockio.c core/dist/sockio.h
