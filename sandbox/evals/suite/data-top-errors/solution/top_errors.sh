#!/bin/bash
# The 5 request paths with the most 5xx responses in a combined-format access log.
set -euo pipefail

awk -F'"' '
    NF >= 3 {
        n = split($2, request, " ")
        if (n != 3) next
        split($3, after, " ")
        status = after[1]
        if (status !~ /^5[0-9][0-9]$/) next
        path = request[2]
        sub(/\?.*/, "", path)
        errors[path]++
    }
    END { for (path in errors) printf "%d %s\n", errors[path], path }
' "${1:-/dev/stdin}" | LC_ALL=C sort -k1,1nr -k2,2 | head -n 5
