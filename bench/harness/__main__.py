"""The benchmark's command line: `python -m harness [--quick] [--skip-s6]
[--report] [--only-s10]` from bench/ (bench/run installs and builds first,
then runs this)."""

from __future__ import annotations

import argparse

from . import __doc__ as about
from .profile import FULL, QUICK
from .run import report_again, run, run_cached_only


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m harness", description=about)
    ap.add_argument("--quick", action="store_true", help="a short smoke run (fewer, shorter rounds)")
    ap.add_argument("--skip-s6", action="store_true")
    ap.add_argument("--report", action="store_true",
                    help="rewrite RESULTS.md and the chart from the last run's raw figures, measuring nothing")
    ap.add_argument("--only-s10", action="store_true",
                    help="run S10 (cached) alone and print its section and targets, writing no report")
    args = ap.parse_args()
    if args.report:
        report_again()
    elif args.only_s10:
        run_cached_only(QUICK if args.quick else FULL)
    else:
        run(QUICK if args.quick else FULL, skip_redlock=args.skip_s6)


if __name__ == "__main__":
    main()
