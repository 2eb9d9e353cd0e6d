grep -c ERROR app.log > count.txt
