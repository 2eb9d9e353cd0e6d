#!/bin/bash
# Clean a sign-up export: normalized emails, ISO dates, plans; one row per email.
set -euo pipefail

exec python3 -c '
import datetime
import re
import sys

MONTHS = {
    name: number
    for number, full in enumerate(
        ["january", "february", "march", "april", "may", "june", "july",
         "august", "september", "october", "november", "december"], start=1)
    for name in (full, full[:3])
}
FORMS = [
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})"), "ymd"),
    (re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})"), "dmy"),
    (re.compile(r"(\d{4})/(\d{2})/(\d{2})"), "ymd"),
    (re.compile(r"([A-Za-z]+) (\d{1,2}), (\d{4})"), "Mdy"),
    (re.compile(r"(\d{1,2}) ([A-Za-z]+) (\d{4})"), "dMy"),
    (re.compile(r"(\d{4})(\d{2})(\d{2})"), "ymd"),
]

def parse_date(text):
    for pattern, order in FORMS:
        match = pattern.fullmatch(text)
        if not match:
            continue
        parts = dict(zip(order, match.groups()))
        month = parts.get("m") or MONTHS.get(parts.get("M", "").lower())
        if month is None:
            return None
        try:
            return datetime.date(int(parts["y"]), int(month), int(parts["d"]))
        except ValueError:
            return None
    return None

best = {}
lines = sys.stdin.read().splitlines()
for position, line in enumerate(lines[1:]):
    if line.count(",") < 2:
        continue
    email, rest = line.split(",", 1)
    raw_date, plan = (field.strip() for field in rest.rsplit(",", 1))
    email = email.strip().lower()
    local, at, domain = email.partition("@")
    if not local or not domain or "@" in domain:
        continue
    date = parse_date(raw_date)
    if date is None:
        continue
    row = (date, position, email, plan.lower() or "free")
    if email not in best or row[:2] < best[email][:2]:
        best[email] = row

print("email,signup_date,plan")
for date, _, email, plan in sorted(best.values(), key=lambda r: (r[0], r[2])):
    print(f"{email},{date.isoformat()},{plan}")
'
