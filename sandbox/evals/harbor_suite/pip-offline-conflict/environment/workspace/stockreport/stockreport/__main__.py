from stockreport.cli import main

main()
