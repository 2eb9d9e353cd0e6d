#!/bin/sh
# sandbox-build: the Docker engine's default runtime, installed and registered by
# `sandbox engine ensure` (sandbox/host/engine.py, which fills in the two paths below).
#
# A container whose cgroup parent is /sandbox-build/gvisor-<token> is a step of a
# tenant's build: only the service sets that parent (a build API argument, out of the
# Dockerfile's reach). It runs under gVisor, with gVisor's network passed through to
# the step's own network namespace (none, or the build's allowlist network). Every
# other container created without a runtime (the engine's images, an operator's own
# containers) runs under runc, as on a stock engine.
#
# The engine calls a runtime once per operation; only `create` names the bundle, so
# the later ones go to runsc when runsc keeps the container's state in --root.
set -u
RUNC=@RUNC@
RUNSC=@RUNSC@

root=/run/runc
bundle=
prev=
for arg in "$@"; do
    case "$prev" in
        --root) root=$arg ;;
        --bundle | -b) bundle=$arg ;;
    esac
    case "$arg" in
        --root=*) root=${arg#--root=} ;;
        --bundle=*) bundle=${arg#--bundle=} ;;
    esac
    prev=$arg
done

if [ -n "$bundle" ]; then
    if grep -qF '"cgroupsPath":"/sandbox-build/gvisor-' "$bundle/config.json"; then
        exec "$RUNSC" --network=host "$@"
    fi
    exec "$RUNC" "$@"
fi
for arg in "$@"; do
    case "$arg" in
        -* | */* | "") continue ;;
    esac
    if [ -e "$root/${arg}_sandbox:${arg}.state" ]; then
        exec "$RUNSC" --network=host "$@"
    fi
done
exec "$RUNC" "$@"
