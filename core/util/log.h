/* Logging for the core: one line per call to stderr, with a level tag. */
#ifndef SY_LOG_H
#define SY_LOG_H

#include "switchyard/plugin.h"

/* Messages above this level are dropped. Set once at start-up, before threads. */
void sy_log_set_level(sy_log_level level);
sy_log_level sy_log_get_level(void);
void sy_log(sy_log_level level, const char *fmt, ...) SY__PRINTF(2, 3);

#define sy_error(...) sy_log(SY_LOG_ERROR, __VA_ARGS__)
#define sy_warn(...) sy_log(SY_LOG_WARN, __VA_ARGS__)
#define sy_info(...) sy_log(SY_LOG_INFO, __VA_ARGS__)
#define sy_debug(...) sy_log(SY_LOG_DEBUG, __VA_ARGS__)

#endif
