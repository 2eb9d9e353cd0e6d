"""Random click-stream events in the shipped format (unordered, mixed offsets, some junk)."""

import datetime
import random

USERS = ["u01", "u02", "alice", "bob", "carol", "u10"]
EVENTS = ["view", "click", "search", "add_to_cart", "checkout", "logout"]
OFFSETS = [0, 60, 120, -300, 330, -420, 545]


def stamp(moment, offset_minutes, rng):
    zone = datetime.timezone(datetime.timedelta(minutes=offset_minutes))
    local = moment.astimezone(zone)
    text = local.strftime("%Y-%m-%dT%H:%M:%S")
    if offset_minutes == 0 and rng.random() < 0.5:
        return text + "Z"
    sign = "+" if offset_minutes >= 0 else "-"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


def generate(seed, n):
    rng = random.Random(seed)
    start = datetime.datetime(2024, 3, 9, 20, 0, tzinfo=datetime.UTC)
    lines = []
    for user in rng.sample(USERS, rng.randint(2, len(USERS))):
        moment = start + datetime.timedelta(minutes=rng.randint(0, 600))
        for _ in range(rng.randint(1, n)):
            gap = rng.choice([0, 1, 5, 29, 30, 30, 31, 45, 120, 600, 1800, 1801])
            moment += datetime.timedelta(seconds=gap * rng.choice([1, 60]))
            lines.append(f"{stamp(moment, rng.choice(OFFSETS), rng)}\t{user}\t{rng.choice(EVENTS)}")
    junk = [
        "2024-03-10T09:00:00\tbob\tview",
        "2024-02-30T09:00:00Z\tbob\tview",
        "yesterday\tcarol\tclick",
        "2024-03-10T09:00:00Z\tcarol",
        "2024-03-10T09:00:00Z\tcarol\tclick\textra",
        "",
    ]
    for line in junk:
        if rng.random() < 0.7:
            lines.append(line)
    rng.shuffle(lines)
    return "timestamp\tuser\tevent\n" + "\n".join(lines) + "\n"
