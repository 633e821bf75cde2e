#include "config.h"
#include "test_cpu_harness.h"
int main(void) { return th_done("test_cpu_plugins"); }
