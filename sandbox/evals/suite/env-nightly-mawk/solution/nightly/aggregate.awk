# Per-sensor statistics of "sensor,timestamp,value" lines (values are integers).
# Sensor names are normalized: the "sensor-" prefix is dropped, letters lower-cased.
# Portable awk (POSIX; runs on mawk): no gensub, asort or PROCINFO.

function sort_numbers(a, n,    i, j, v) {
    for (i = 2; i <= n; i++) {
        v = a[i]
        for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]
        a[j + 1] = v
    }
}

function sort_strings(a, n,    i, j, v) {
    for (i = 2; i <= n; i++) {
        v = a[i]
        for (j = i - 1; j >= 1 && a[j] "" > v ""; j--) a[j + 1] = a[j]
        a[j + 1] = v
    }
}

{
    name = $1
    sub(/^[Ss]ensor-/, "", name)
    name = tolower(name)
    value = $3 + 0
    if (!(name in count)) names[++sensors] = name
    count[name]++
    sum[name] += value
    values[name, count[name]] = value
    if (count[name] == 1 || value < min[name]) min[name] = value
    if (count[name] == 1 || value > max[name]) max[name] = value
}

END {
    sort_strings(names, sensors)
    for (k = 1; k <= sensors; k++) {
        name = names[k]
        n = count[name]
        split("", sorted)
        for (i = 1; i <= n; i++) sorted[i] = values[name, i]
        sort_numbers(sorted, n)
        if (n % 2) median = sorted[(n + 1) / 2]
        else median = (sorted[n / 2] + sorted[n / 2 + 1]) / 2
        printf "%-8s count=%d min=%d max=%d mean=%.2f median=%.1f\n", \
            name, n, min[name], max[name], sum[name] / n, median
    }
}
