"""Running: one cell (harness), the matrix, scheduling, lanes, runner environments, interrupts."""
