#include "config.h"
#include "units.h"

double to_units(long counts) { return (double)counts / SCALE; }
const char *unit_name(void) { return UNIT; }
