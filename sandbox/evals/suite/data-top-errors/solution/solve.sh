bash top_errors.sh logs/access.log > report.txt
