mkdir -p clean
bash normalize.sh < raw/signups.csv > clean/signups.csv
