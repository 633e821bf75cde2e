#include "config.h"

#include "cli/commands.h"
#include "switchyard/plugin.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: switchyard COMMAND [options]\n"
            "commands:\n"
            "  bench      benchmark a running server (SGLang bench_serving's figures)\n"
            "  bench-comm allreduce latency and bus bandwidth of the comm plugins (nccl-tests' table)\n"
            "  bench-grammar  token-mask time per token for constrained decoding (JSON schema, json_any)\n"
            "  bench-spec speculative decoding: verify and draft step cost vs a decode step, expected speedup\n"
            "  doctor     the GPUs, driver and CUDA runtime (or why they fail), and the plugins auto picks\n"
            "  generate   generate text from a prompt (streams to stdout)\n"
            "  plugins    list the plugins found, with probe scores or why they cannot run\n"
            "  plugin-check FILE.so  check a plugin's ops against a float64 reference (--speed: time them)\n"
            "  serve      serve the model through the configured frontends (OpenAI API over HTTP)\n"
            "  tune-moe   time the moe plugin's expert GEMM tiles for a model and write its tuning table\n"
            "  --version  print the version\n"
            "Run `switchyard COMMAND --help` for a command's options.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("switchyard %s (plugin ABI %d.%d)\n", PACKAGE_VERSION, SY_ABI_MAJOR, SY_ABI_MINOR);
        return 0;
    }
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "bench") == 0)
        return sy_cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "bench-comm") == 0)
        return sy_cmd_bench_comm(argc - 1, argv + 1);
    if (strcmp(cmd, "bench-grammar") == 0)
        return sy_cmd_bench_grammar(argc - 1, argv + 1);
    if (strcmp(cmd, "bench-spec") == 0)
        return sy_cmd_bench_spec(argc - 1, argv + 1);
    if (strcmp(cmd, "doctor") == 0)
        return sy_cmd_doctor(argc - 1, argv + 1);
    if (strcmp(cmd, "generate") == 0)
        return sy_cmd_generate(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0)
        return sy_cmd_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "plugins") == 0)
        return sy_cmd_plugins(argc - 1, argv + 1);
    if (strcmp(cmd, "plugin-check") == 0)
        return sy_cmd_plugin_check(argc - 1, argv + 1);
    if (strcmp(cmd, "tune-moe") == 0)
        return sy_cmd_tune_moe(argc - 1, argv + 1);
    fprintf(stderr, "switchyard: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return 2;
}
