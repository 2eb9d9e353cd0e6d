bash summarize.sh data/customers.csv data/orders.csv > summary.csv
