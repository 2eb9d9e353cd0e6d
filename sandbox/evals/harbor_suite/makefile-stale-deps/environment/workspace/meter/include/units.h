#ifndef UNITS_H
#define UNITS_H
double to_units(long counts);
const char *unit_name(void);
#endif
