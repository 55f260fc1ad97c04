"""`python -m looplab.cli`: the `looplab` command."""

from looplab.cli import main

raise SystemExit(main())
