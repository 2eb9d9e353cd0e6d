#!/bin/bash
# Reference fix: run-parts skips names with a dot (10-rotate-cache.sh) and
# files without the execute bit (20-backup); 30-report's CRLF line endings make
# its interpreter "/bin/sh\r"; 40-cleanup uses a bash array under #!/bin/sh.
set -euo pipefail
cd /workspace/cron/daily
mv 10-rotate-cache.sh 10-rotate-cache
chmod 0755 20-backup
sed -i 's/\r$//' 30-report
sed -i '1s|^#!/bin/sh$|#!/bin/bash|' 40-cleanup
run-parts --test .
