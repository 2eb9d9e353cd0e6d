import math


def isqrt(n):
    return math.isqrt(n)
