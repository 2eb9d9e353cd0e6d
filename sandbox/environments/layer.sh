#!/bin/sh
# Layers the sandbox runner into a task's image (the last stage of every
# environment build, see build.py): python3 (installed from Debian's or
# Ubuntu's archive with apt-get when the image lacks it), bash, tar and find,
# the unprivileged users sandbox (10001) and judge (10002), /workspace and
# /judge, the runner's sources under /opt/sandbox/runner, and a copy of the
# task's WORKDIR in /opt/sandbox-seed (a session copies it onto a writable
# tmpfs at the WORKDIR, since the root filesystem is read-only at run time).
set -eu
refuse() {
    echo "sandbox-layer: $*" >&2
    exit 97
}
need=""
command -v python3 >/dev/null 2>&1 || need="$need python3"
command -v bash >/dev/null 2>&1 || need="$need bash"
command -v tar >/dev/null 2>&1 || need="$need tar"
command -v find >/dev/null 2>&1 || need="$need findutils"
if [ -n "$need" ]; then
    base="base the task on an image with python3 >= 3.9, bash, tar and find (or alias its \
FROM to sandbox-python in the environments config)"
    command -v apt-get >/dev/null 2>&1 || refuse "the image lacks$need and has no apt-get to \
install them; $base"
    echo "sandbox-layer: installing$need with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    offline="build steps reach the image's package archive only where the operator sets \
build_network: allowlist with the archive in build_allow, or bridge; $base"
    apt-get update -qq \
        || refuse "apt-get update failed to install$need ($offline)"
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $need >/dev/null \
        || refuse "apt-get install$need failed ($offline)"
    apt-get clean
    rm -rf /var/lib/apt/lists/*
fi
# What the image could use to steer the runner, which runs as root: a preload list of the
# dynamic loader's (it loads into every process, whatever the environment), or a runner
# directory that leads elsewhere.
[ ! -s /etc/ld.so.preload ] || refuse "the image has /etc/ld.so.preload, which would load \
into the runner; remove it (set LD_PRELOAD in a command's env instead)"
[ "$(readlink -f /opt/sandbox)" = /opt/sandbox ] || refuse "/opt or /opt/sandbox is a \
link in the image; /opt/sandbox is the platform's"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' \
    || refuse "the image's python3 is $(python3 -V 2>&1); the runner needs Python >= 3.9"
if [ "$(pwd)" != "/" ]; then
    mkdir -p /opt/sandbox-seed
    cp -a . /opt/sandbox-seed/
    chmod -R a+rX /opt/sandbox-seed
fi
getent group 10001 >/dev/null 2>&1 || echo "sandbox:x:10001:" >> /etc/group
getent group 10002 >/dev/null 2>&1 || echo "judge:x:10002:" >> /etc/group
getent passwd 10001 >/dev/null 2>&1 \
    || echo "sandbox:x:10001:10001::/workspace:/usr/sbin/nologin" >> /etc/passwd
getent passwd 10002 >/dev/null 2>&1 \
    || echo "judge:x:10002:10002::/judge:/usr/sbin/nologin" >> /etc/passwd
mkdir -p /workspace /judge
chown 10001:10001 /workspace && chmod 0755 /workspace
chown 10002:10002 /judge && chmod 0700 /judge
rm -f /opt/sandbox/layer.sh
python3 -m compileall -q /opt/sandbox/runner >/dev/null \
    || refuse "the runner does not compile with the image's $(python3 -V 2>&1)"
chown -R 0:0 /opt/sandbox
find /opt/sandbox -type d -exec chmod 0755 {} +
find /opt/sandbox -type f -exec chmod 0644 {} +
