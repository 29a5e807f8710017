"""python -m dlinterop: build facts, then a round trip with each installed framework.
python -m dlinterop check NAME...: the DLPack conformance checker (dlinterop.testing)."""
import sys


def _main(argv: list[str]) -> int:
    if argv[:1] == ["check"]:
        from dlinterop.testing import main as check

        return check(argv[1:])
    from dlinterop._report import main

    return main()


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
