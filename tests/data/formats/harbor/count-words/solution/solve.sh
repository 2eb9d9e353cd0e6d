#!/bin/bash
echo "the quick brown fox jumps" | wc -w > /app/count.txt
