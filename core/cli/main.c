#include "config.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("switchyard %s\n", PACKAGE_VERSION);
        return 0;
    }
    fprintf(stderr, "usage: switchyard COMMAND ...\n");
    return 2;
}
