# Tensor parallelism across processes: the step-plan wire format and its
# transport (plan.c), and starting the ranks of one node (launch.c).
libsycore_a_SOURCES += \
	core/dist/plan.c core/dist/plan.h \
	core/dist/launch.c core/dist/launch.h
