"""The runners and the two boundaries every runner sits between.

- `contract/`: the leaf every room may use: limits, stop reasons, the result and trace records, a runner's
  declaration, the model spec, the files rule, errors.
- `boundary/`: the model recorder and proxy, pacing, noise capture, the MCP tool server and client, runner
  processes; it knows no runner.
- `session.py`: one run's session (clock, budget, gate, stop, result) and the `Runner` base a runner subclasses.
- `runners/`: one module per runner; `_name.py` helper layers beside them; `ts/` the node runners' programs.
- `registry.py`: the runners looplab knows, found without importing a framework.
"""
