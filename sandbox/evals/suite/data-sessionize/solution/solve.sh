bash sessionize.sh < events.tsv > sessions.csv
