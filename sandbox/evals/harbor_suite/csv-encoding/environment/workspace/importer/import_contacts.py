"""import_contacts.py INBOX OUT.csv: merges the contact exports in INBOX.

Every INBOX/*.csv has a header line with (at least) the columns name, email
and city. OUT.csv (UTF-8) gets one row per distinct email (compared
case-insensitively; the first file in name order, and the first row in it,
wins), with the email lower-cased, sorted by email, under the header
name,email,city.
"""

import csv
import sys
from pathlib import Path


def read_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def main() -> None:
    inbox, out = Path(sys.argv[1]), Path(sys.argv[2])
    contacts: dict[str, dict[str, str]] = {}
    for path in sorted(inbox.glob("*.csv")):
        for row in read_rows(path):
            email = row["email"].strip().lower()
            if email and email not in contacts:
                contacts[email] = {
                    "name": row["name"].strip(),
                    "email": email,
                    "city": row["city"].strip(),
                }
    with open(out, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["name", "email", "city"])
        writer.writeheader()
        writer.writerows(contacts[e] for e in sorted(contacts))


if __name__ == "__main__":
    main()
