# random.py shadows the standard library's random (tempfile needs it), and
# vendor/yaml.py shadows PyYAML: rename the helper, drop the stale stub.
mv random.py sampling.py
sed -i 's/^from random import sample_rows$/from sampling import sample_rows/' report.py
rm -f vendor/yaml.py
rmdir vendor 2>/dev/null || true
sed -i 's/^PYTHONPATH=vendor python3 report.py/python3 report.py/' run.sh
bash run.sh data/measurements.csv
