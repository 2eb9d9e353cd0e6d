import os
import sys

sys.path.insert(0, os.environ["WORK"])
