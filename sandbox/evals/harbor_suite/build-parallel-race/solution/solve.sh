#!/bin/bash
# Reference fix: each object that includes a generated table depends on it, and
# each table is written through its own temporary file ($@.tmp), so the two
# generators no longer clobber a shared build/table.tmp.
set -euo pipefail
cd /workspace/calc
cat > Makefile <<'MAKEFILE'
# calc: a tiny RPN calculator whose operator and error tables are generated
# from ops.def and errors.def by tools/gen-table.sh.
CC ?= cc
CFLAGS ?= -O2 -Wall -Werror
BUILD := build
OBJS := $(BUILD)/main.o $(BUILD)/ops.o $(BUILD)/errors.o

all: $(BUILD)/calc

$(BUILD)/calc: $(OBJS)
	$(CC) $(CFLAGS) -o $@ $(OBJS)

# The objects that include a generated table must wait for it.
$(BUILD)/ops.o: $(BUILD)/ops_table.h
$(BUILD)/errors.o: $(BUILD)/errors_table.h
$(OBJS): src/calc.h

$(BUILD)/ops_table.h: ops.def tools/gen-table.sh | $(BUILD)
	sh tools/gen-table.sh ops ops.def > $@.tmp
	mv $@.tmp $@

$(BUILD)/errors_table.h: errors.def tools/gen-table.sh | $(BUILD)
	sh tools/gen-table.sh errors errors.def > $@.tmp
	mv $@.tmp $@

$(BUILD)/%.o: src/%.c | $(BUILD)
	$(CC) $(CFLAGS) -Isrc -I$(BUILD) -c -o $@ $<

$(BUILD):
	mkdir -p $@

clean:
	rm -rf $(BUILD)

.PHONY: all clean
MAKEFILE
make clean >/dev/null
make -j4
