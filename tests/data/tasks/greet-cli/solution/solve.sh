cat > greet.sh <<'SCRIPT'
#!/bin/bash
name="${1:-$(cat data/name.txt)}"
printf 'hello, %s\n' "$name"
SCRIPT
