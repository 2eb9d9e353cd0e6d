#!/bin/bash
# Reference fix: the compiler writes each object's header dependencies
# (-MMD, with -MP phony targets so a deleted header does not break make), the
# Makefile includes them, and meter depends on its objects (not order-only).
set -euo pipefail
cd /workspace/meter
sed -i \
    -e 's/^meter: | \$(OBJS)$/meter: $(OBJS)/' \
    -e 's/^\t\$(CC) \$(CPPFLAGS) \$(CFLAGS) -c -o \$@ \$<$/\t$(CC) $(CPPFLAGS) -MMD -MP $(CFLAGS) -c -o $@ $</' \
    Makefile
printf '\n-include $(OBJS:.o=.d)\n' >> Makefile
grep -q -- '-MMD -MP' Makefile && grep -q '^meter: \$(OBJS)$' Makefile
make clean >/dev/null
make
