#!/bin/bash
# Reference fix: restore the soname link the tarball lost (relative), move the
# binary to libexec/ and put a wrapper at bin/labelgen that finds its own
# installation (through symlinks) and puts vendor/lib first on the loader path.
set -euo pipefail
cd /workspace/labelgen
ln -sfn libcheck.so.1.4.2 vendor/lib/libcheck.so.1
mkdir -p libexec
mv bin/labelgen libexec/labelgen
cat > bin/labelgen <<'SH'
#!/bin/sh
# labelgen: runs the vendor binary in ../libexec with its bundled libraries.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/../vendor/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
exec "$here/../libexec/labelgen" "$@"
SH
chmod 0755 bin/labelgen
env -i bin/labelgen --version
