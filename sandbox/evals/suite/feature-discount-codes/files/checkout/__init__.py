"""Price a shopping cart against a catalog and print a receipt."""
