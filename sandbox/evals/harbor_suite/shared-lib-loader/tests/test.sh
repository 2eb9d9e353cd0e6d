#!/bin/bash
# Verifier for shared-lib-loader. Runs as root in a fresh copy of the
# task's environment holding the agent's /workspace; labelgen runs as the
# agent's uid (10001), never as root. Reward 1 only if every check passes.
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

tool=/workspace/labelgen/bin/labelgen
[ -x "$tool" ] || fail "$tool is not executable"
scratch=$(mktemp -d /tmp/verify.XXXXXX)
mkdir -p "$scratch/other dir" "$scratch/decoy"
ln -s "$tool" "$scratch/other dir/lg"
gcc -shared -fPIC -Wl,-soname,libcheck.so.1 -o "$scratch/decoy/libcheck.so.1" /tests/decoy.c \
    || fail "cannot build the decoy library"
chmod -R a+rX "$scratch"

version="labelgen 2.1 (libcheck 1.4.2)"
out=$(cd / && as_agent env -i "$tool" --version 2>&1)
[ "$out" = "$version" ] || fail "env -i labelgen --version printed: $out"
out=$(cd "$scratch" && as_agent env -i LD_LIBRARY_PATH="$scratch/decoy" "$scratch/other dir/lg" --version 2>&1)
[ "$out" = "$version" ] || fail "with a decoy libcheck on LD_LIBRARY_PATH, through a symlink: $out"
out=$(cd /tmp && as_agent env -i LD_LIBRARY_PATH=/nonexistent "$tool" --version 2>&1)
[ "$out" = "$version" ] || fail "with LD_LIBRARY_PATH=/nonexistent: $out"

# Labels for codes the task never showed, against the check-digit rule.
python3 - "$tool" "$scratch/other dir/lg" <<'PY' || exit 0
import os, random, string, subprocess, sys

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

def check(code):
    total, weight = 0, 1
    for c in code.upper():
        if c.isascii() and c.isalnum():
            total += (int(c) if c.isdigit() else ord(c) - ord("A") + 10) * weight
            weight = weight % 7 + 2
    return ALPHABET[total % 32]

rng = random.Random(20240306)
codes = ["".join(rng.choice(string.ascii_letters + string.digits + "- ") for _ in range(rng.randint(3, 14)))
         for _ in range(40)] + ["two words", " lead", "-x", "--", "*"]
want = "".join(f"[{c}] {check(c)}\n" for c in codes)
root = os.geteuid() == 0
agent = ["setpriv", "--reuid=10001", "--regid=10001", "--clear-groups", "--reset-env"] if root else ["agent-run"]
for exe in sys.argv[1:]:
    argv = [*agent, "env", "-i", exe, *codes]
    got = subprocess.run(argv, capture_output=True, text=True, cwd="/tmp", pass_fds=() if root else (3,))
    if got.stdout != want:
        print(f"FAIL: {exe} printed {got.stdout[:300]!r} (stderr {got.stderr[:200]!r}), expected {want[:300]!r}")
        sys.exit(1)
PY

echo PASS
echo 1 > /logs/verifier/reward.txt
