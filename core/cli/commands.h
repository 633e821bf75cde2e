/* The subcommands of the switchyard binary. Each returns the exit status. */
#ifndef SY_COMMANDS_H
#define SY_COMMANDS_H

int sy_cmd_bench(int argc, char **argv);
int sy_cmd_bench_comm(int argc, char **argv);
int sy_cmd_bench_grammar(int argc, char **argv);
int sy_cmd_bench_spec(int argc, char **argv);
int sy_cmd_doctor(int argc, char **argv);
int sy_cmd_generate(int argc, char **argv);
int sy_cmd_plugins(int argc, char **argv);
int sy_cmd_plugin_check(int argc, char **argv);
int sy_cmd_serve(int argc, char **argv);
int sy_cmd_tune_moe(int argc, char **argv);

#endif
