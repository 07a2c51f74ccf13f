"""`python -m bench`: the peer benchmark (bench/peers/run.py); `--engine` runs
bench/bench_engine.py with the remaining arguments; `replicas` runs bench/bench_replicas.py
(1 vs 3 replicas on PostgreSQL) with the remaining arguments; `crossings` runs bench/crossings.py
(package crossings of three flows, package cycles) with the remaining arguments; `lists` runs
bench/bench_lists.py (the first page of the session list with 100,000 sessions); `calls` runs
bench/calls.py (Python calls, commits and statements per fire, counted over a burst).
"""

import sys

if sys.argv[1:2] == ["replicas"]:
    from bench.bench_replicas import main as replicas_main

    sys.exit(replicas_main(sys.argv[2:]))

if sys.argv[1:2] == ["lists"]:
    from bench.bench_lists import main as lists_main

    sys.exit(lists_main(sys.argv[2:]))

if sys.argv[1:2] == ["calls"]:
    from bench.calls import main as calls_main

    sys.exit(calls_main(sys.argv[2:]))

if sys.argv[1:2] == ["crossings"]:
    from bench.crossings import main as crossings_main

    sys.exit(crossings_main(sys.argv[2:]))

from bench.peers.run import main

sys.exit(main())
