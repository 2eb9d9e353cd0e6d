"""gen_events.py OUT ROWS SEED: a deterministic event log like the nightly export."""

import random
import sys

out, rows, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
regions = ["ap-south", "eu-central", "eu-west", "sa-east", "us-east", "us-west"]
with open(out, "w", encoding="utf-8") as f:
    f.write("ts,user,region,bytes\n")
    ts = 1_700_000_000
    chunk = []
    for _ in range(rows):
        ts += rng.randint(0, 3)
        user = f"user{int(rng.paretovariate(1.2)) % 20000:05d}"
        chunk.append(f"{ts},{user},{rng.choice(regions)},{rng.randint(40, 900_000)}\n")
        if len(chunk) == 10_000:
            f.write("".join(chunk))
            chunk = []
    f.write("".join(chunk))
