"""`python -m looplab`: the same as the `looplab` command."""

from looplab.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
