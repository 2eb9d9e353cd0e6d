sed -i 's/\r$//' tools/report.sh tools/summarize.py
sed -i '1s|^#!/usr/bin/env python$|#!/usr/bin/env python3|' tools/summarize.py
sed -i 's|^python tools/summarize.py|python3 tools/summarize.py|' tools/report.sh
chmod +x tools/report.sh tools/summarize.py
./tools/report.sh data/sales.csv
