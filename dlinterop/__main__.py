"""The command line: python -m dlinterop [info | check NAME... | bench] [--help] [--version].

Without a command it prints the report (`info`): the build facts, then a zero-copy round
trip with each installed framework."""

import argparse
import os
import sys

_EPILOG = "python -m dlinterop COMMAND --help describes each command."


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each command's, by name (for usage errors)."""
    from dlinterop import __version__
    from dlinterop.testing import _cli as check_cli

    parser = argparse.ArgumentParser(
        prog="python -m dlinterop",
        description="dlinterop: zero-copy tensor interchange through DLPack 1.3.",
        epilog=_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"dlinterop {__version__}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands (default: info)"
    )
    commands.add_parser(
        "info",
        help="the build facts and a round trip with each installed framework",
        description="Print what was built (dl.build_info()), then exchange a tensor with "
        "each installed framework both ways, proving zero-copy by pointer "
        "equality and timing each exchange. Exit 1 if an exchange copied.",
    )
    check = commands.add_parser(
        "check", help="the DLPack conformance checker", description=check_cli.DESCRIPTION
    )
    check_cli.add_arguments(check)
    bench = commands.add_parser(
        "bench",
        help="a quick benchmark beside NumPy and PyTorch",
        description="Time the everyday exchanges with dlinterop and each installed peer in "
        "this process (a few seconds): ns per call and the ratio to the fastest "
        "peer. The full suite is python -m benchmarks in the source tree.",
    )
    bench.add_argument(
        "--peers",
        default="numpy,torch",
        help="comma-separated peers to time beside dlinterop: numpy and torch in the main "
        "table, any other framework the checker knows (jax, tvm_ffi, array_api_strict, cupy, "
        "pyarrow, cuda_core, mlx, warp, nanobind) as its import beside dl.from_dlpack "
        "(default: %(default)s; those not installed are left out)",
    )
    bench.add_argument(
        "--repeats",
        type=int,
        default=9,
        help="interleaved repeats per cell; the median is shown (default: 9)",
    )
    bench.add_argument(
        "--json", metavar="FILE", type=check_cli.output_file, help="also write the results as JSON"
    )
    return parser, {"check": check, "bench": bench}


def _main(argv: list[str]) -> int:
    parser, command_parsers = _parser()
    args = parser.parse_args(argv)
    from dlinterop.testing import _cli as check_cli

    if args.command == "check":
        return check_cli.run(args, command_parsers["check"])
    if args.command == "bench":
        from dlinterop._cli import bench as _bench

        peers = tuple(p.strip() for p in args.peers.split(",") if p.strip())
        unknown = sorted(set(peers) - set(_bench.ALL_PEERS))
        if unknown:
            command_parsers["bench"].error(
                f"unknown peer(s) {', '.join(unknown)}; choose from {', '.join(_bench.ALL_PEERS)}"
            )
        if args.repeats < 1:
            command_parsers["bench"].error("--repeats must be at least 1")
        result = _bench.main(peers, args.repeats)
        if args.json and not check_cli.write_json(args.json, result, command_parsers["bench"].prog):
            return 1
        return 0
    from dlinterop._cli.report import main

    return main()


def _run(argv: list[str]) -> int:
    """_main's exit status; a reader that went away (python -m dlinterop check --list |
    head) ends it quietly, as the Python docs advise (their Note on SIGPIPE), where its
    output's flush at exit would print a traceback."""
    try:
        status = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status


if __name__ == "__main__":
    sys.exit(_run(sys.argv[1:]))
