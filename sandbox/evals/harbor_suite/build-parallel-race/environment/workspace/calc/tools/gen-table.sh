#!/bin/sh
# gen-table.sh KIND FILE: writes a C table for KIND ("ops" or "errors") from
# FILE to stdout. The real generator validates every entry against the
# project's schema service, which takes a while: the sleep stands in for it.
set -eu
kind=$1
file=$2
echo "/* generated from $file by tools/gen-table.sh: do not edit */"
sleep 1
case $kind in
ops)
    echo "static const struct op OPS[] = {"
    while read -r name sym; do
        echo "    {\"$sym\", op_$name},"
    done < "$file"
    echo "};"
    ;;
errors)
    echo "static const char *const ERRORS[] = {"
    while read -r name text; do
        echo "    [ERR_$(echo "$name" | tr a-z A-Z)] = \"$text\","
    done < "$file"
    echo "};"
    ;;
*)
    echo "gen-table.sh: unknown kind $kind" >&2
    exit 2
    ;;
esac
