#!/bin/bash
# Reference fix: the compiler writes each object's header dependencies
# (-MMD, with -MP phony targets so a deleted header does not break make), the
# Makefile includes them, and meter depends on its objects (not order-only).
set -euo pipefail
cd /workspace/meter
cat > Makefile <<'MAKEFILE'
# meter: converts raw sensor counts to readings.
CC ?= cc
CFLAGS ?= -O2 -Wall -Werror
CPPFLAGS += -Iinclude
DEPFLAGS = -MMD -MP
OBJS := build/main.o build/units.o

all: meter

meter: $(OBJS)
	$(CC) $(CFLAGS) -o $@ $(OBJS)

build/%.o: src/%.c
	@mkdir -p build
	$(CC) $(CPPFLAGS) $(DEPFLAGS) $(CFLAGS) -c -o $@ $<

clean:
	rm -rf build meter

.PHONY: all clean

-include $(OBJS:.o=.d)
MAKEFILE
make clean >/dev/null
make
