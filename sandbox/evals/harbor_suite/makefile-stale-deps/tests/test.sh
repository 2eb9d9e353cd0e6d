#!/bin/bash
# Verifier for makefile-stale-deps. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; make runs as the agent's
# uid (10001), never as root. Reward 1 only if every check passes.
set -u
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
if [ "$(id -u)" = 0 ]; then  # Harbor: root, in a fresh container holding the agent's /workspace
    chown -R 10001:10001 /workspace
    chmod -R go-rwx /tests  # the agent's programs (uid 10001) cannot read the tests
    as_agent() { setpriv --reuid=10001 --regid=10001 --clear-groups --reset-env -- "$@"; }
    give() { chown -R 10001:10001 "$@"; }  # the verifier's files, to the agent's uid
else  # sandbox-platform: the judge uid, /tests unreadable to others; agent-run is the uid drop
    export TMPDIR=/tmp  # scratch the agent's uid can enter (the judge's own is /judge)
    as_agent() { agent-run "$@"; }
    give() { find "$@" -user "$(id -u)" -exec chmod a+rwX {} +; }  # the agent's are its own
fi
# put MODE SRC DEST: a file of the task's into the agent's tree, written as the agent.
put() { as_agent sh -c 'cat > "$2" && chmod "$1" "$2"' sh "$1" "$3" < "$2"; }
fail() { echo "FAIL: $*"; exit 0; }

cd /workspace/meter || fail "/workspace/meter is missing"
# The sources are the task's; only the Makefile is the agent's.
as_agent rm -rf src include
as_agent cp -r /opt/meter/src /opt/meter/include .
build() { out=$(as_agent timeout 120 make 2>&1) || fail "make failed ($1): $out"; }
compiled() { echo "$out" | grep -Eo -- '-o [^ ]+' | awk '{print $2}' | sort | tr '\n' ' '; }
edit() { sleep 1; as_agent sed -i "$1" "$2"; }
reading() { as_agent ./meter 2500; }

as_agent make clean >/dev/null 2>&1
build "from clean"
[ "$(reading)" = "2.500 kPa" ] || fail "a clean build's meter prints $(reading)"
build "with nothing changed"
[ -z "$(compiled)" ] || fail "with nothing changed make still built: $(compiled)"

edit 's/#define SCALE 1000/#define SCALE 100/' include/config.h
build "after editing config.h"
[ "$(compiled)" = "build/units.o meter " ] || fail "after editing config.h make built: $(compiled)"
[ "$(reading)" = "25.000 kPa" ] || fail "after editing config.h meter prints $(reading)"

edit 's/double to_units(long counts);/double to_units(long counts); \/* counts to units *\//' include/units.h
build "after editing units.h"
[ "$(compiled)" = "build/main.o build/units.o meter " ] || fail "after editing units.h make built: $(compiled)"

# A header added later is tracked without touching the Makefile...
sleep 1
printf '#ifndef FMT_H\n#define FMT_H\n#define FMT "%%.3f %%s\\n"\n#endif\n' | as_agent sh -c 'cat > include/fmt.h'
edit 's|#include "units.h"|#include "units.h"\n#include "fmt.h"|; s|printf("%.3f %s\\n",|printf(FMT,|' src/main.c
build "after adding fmt.h"
[ "$(compiled)" = "build/main.o meter " ] || fail "after adding fmt.h make built: $(compiled)"
edit 's|#define FMT "%.3f %s\\n"|#define FMT "%.1f %s\\n"|' include/fmt.h
build "after editing fmt.h"
[ "$(compiled)" = "build/main.o meter " ] || fail "after editing the new fmt.h make built: $(compiled)"
[ "$(reading)" = "25.0 kPa" ] || fail "after editing fmt.h meter prints $(reading)"

# ...and one deleted (with its #include) does not break the build.
as_agent cp /opt/meter/src/main.c src/main.c
as_agent rm include/fmt.h
build "after deleting fmt.h"
[ "$(reading)" = "25.000 kPa" ] || fail "after deleting fmt.h meter prints $(reading)"
build "with nothing changed, again"
[ -z "$(compiled)" ] || fail "with nothing changed make still built: $(compiled)"

echo PASS
echo 1 > /logs/verifier/reward.txt
