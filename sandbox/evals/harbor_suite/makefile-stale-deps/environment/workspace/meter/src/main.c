/* meter COUNTS...: prints each raw count as a reading. */
#include <stdio.h>
#include <stdlib.h>
#include "units.h"

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        printf("%.3f %s\n", to_units(strtol(argv[i], NULL, 10)), unit_name());
    return 0;
}
