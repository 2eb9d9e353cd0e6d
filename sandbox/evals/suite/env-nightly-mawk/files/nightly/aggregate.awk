# Per-sensor statistics of "sensor,timestamp,value" lines (values are integers).
# Sensor names are normalized: the "sensor-" prefix is dropped, letters lower-cased.
{
    name = tolower(gensub(/^[Ss]ensor-/, "", 1, $1))
    count[name]++
    sum[name] += $3
    values[name, count[name]] = $3
    if (count[name] == 1 || $3 < min[name]) min[name] = $3
    if (count[name] == 1 || $3 > max[name]) max[name] = $3
}

END {
    PROCINFO["sorted_in"] = "@ind_str_asc"
    for (name in count) {
        n = count[name]
        delete sorted
        for (i = 1; i <= n; i++) sorted[i] = values[name, i]
        asort(sorted)
        if (n % 2) median = sorted[(n + 1) / 2]
        else median = (sorted[n / 2] + sorted[n / 2 + 1]) / 2
        printf "%-8s count=%d min=%d max=%d mean=%.2f median=%.1f\n", \
            name, n, min[name], max[name], sum[name] / n, median
    }
}
