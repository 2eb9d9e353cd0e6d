"""stockreport: a warehouse stock report from a CSV of item,amount,unit."""
