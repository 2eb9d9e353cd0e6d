#!/bin/bash
# Reference fix: each object that includes a generated table depends on it
# (instead of only the final link listing the tables first), and each table is
# written through its own temporary file ($@.tmp), so the two generators no
# longer clobber a shared build/table.tmp.
set -euo pipefail
cd /workspace/calc
sed -i \
    -e 's|^\$(BUILD)/calc: \$(BUILD)/ops_table.h \$(BUILD)/errors_table.h \$(OBJS)$|$(BUILD)/calc: $(OBJS)|' \
    -e 's|> \$(BUILD)/table.tmp$|> $@.tmp|' \
    -e 's|^\tmv \$(BUILD)/table.tmp \$@$|\tmv $@.tmp $@|' \
    Makefile
cat >> Makefile <<'MAKEFILE'

# The objects that include a generated table must wait for it.
$(BUILD)/ops.o: $(BUILD)/ops_table.h
$(BUILD)/errors.o: $(BUILD)/errors_table.h
$(OBJS): src/calc.h
MAKEFILE
! grep -q 'table.tmp' Makefile
make clean >/dev/null
make -j4
