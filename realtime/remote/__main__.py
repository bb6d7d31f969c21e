import os
import sys

# As main.py: OpenBLAS's idle threads spin on sched_yield and take cores from the streams' threads
# (the engine's BLAS work is a few tiny matrices per face). Set before numpy loads; a user's own wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from realtime.remote.cli import main

sys.exit(main())
