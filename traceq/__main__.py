"""``python -m traceq``: the command line, as the ``traceq`` script runs it."""

from traceq.cli import main

main()
