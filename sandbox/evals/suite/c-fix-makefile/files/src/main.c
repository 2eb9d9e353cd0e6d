#include <errno.h>
#include <string.h>

#include "counts.h"
#include "version.h"

int main(int argc, char **argv)
{
    struct counts total = {0, 0, 0};
    int status = 0;

    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("wcl %s\n", WCL_VERSION);
        return 0;
    }
    if (argc < 2) {
        count_stream(stdin, &total);
        print_counts(&total, NULL);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        struct counts one = {0, 0, 0};
        FILE *in = fopen(argv[i], "rb");

        if (in == NULL) {
            fprintf(stderr, "wcl: %s: %s\n", argv[i], strerror(errno));
            status = 1;
            continue;
        }
        count_stream(in, &one);
        fclose(in);
        print_counts(&one, argv[i]);
        total.lines += one.lines;
        total.words += one.words;
        total.bytes += one.bytes;
    }
    if (argc > 2)
        print_counts(&total, "total");
    return status;
}
