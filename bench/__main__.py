"""`python -m bench`: the peer benchmark (bench/peers/run.py); `--engine` runs
bench/bench_engine.py with the remaining arguments.
"""

import sys

from bench.peers.run import main

sys.exit(main())
