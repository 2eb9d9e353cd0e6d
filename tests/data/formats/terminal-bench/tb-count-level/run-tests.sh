#!/bin/bash
python3 -m pytest -q -p no:cacheprovider $TEST_DIR/test_outputs.py
