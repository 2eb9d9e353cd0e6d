#ifndef CONFIG_H
#define CONFIG_H
/* Counts per unit of the sensor model in use. */
#define SCALE 1000
#define UNIT "kPa"
#endif
