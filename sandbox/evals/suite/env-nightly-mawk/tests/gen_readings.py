"""Random daily reading files in the shipped format."""

import random


def generate(seed, days):
    rng = random.Random(seed)
    sensors = rng.sample(["sensor-A1", "sensor-b2", "Sensor-C3", "sensor-a10", "sensor-Z"], 3)
    sensors.append("sensor-a1")
    files = {}
    for day in range(days):
        rows = ["sensor,timestamp,value"]
        for i in range(rng.randint(0, 40)):
            sensor = rng.choice(sensors)
            stamp = f"2024-04-{day + 1:02d}T{i % 24:02d}:{rng.randint(0, 59):02d}:00Z"
            rows.append(f"{sensor},{stamp},{rng.randint(-30, 60)}")
        files[f"readings-2024-04-{day + 1:02d}.csv"] = "\n".join(rows) + "\n"
    return files
