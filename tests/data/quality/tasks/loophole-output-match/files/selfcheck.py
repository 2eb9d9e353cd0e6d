import calc

print("OK" if calc.add(2, 3) == 5 and calc.add(-4, 1) == -3 else "WRONG")
