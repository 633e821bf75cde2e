/* `switchyard plugins`: what the plugin search path holds, and why refused files were refused. */
#ifndef SY_CMD_PLUGINS_H
#define SY_CMD_PLUGINS_H

/*
 * argv[0] is "plugins". Options: -c CONFIG, --plugin-dir DIR (repeatable),
 * --set section.key=value, -v/-q. Returns the exit status: 0, 1 when a
 * configured section cannot get its plugin, 2 on bad usage.
 */
int sy_cmd_plugins(int argc, char **argv);

#endif
