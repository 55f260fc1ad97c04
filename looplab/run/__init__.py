"""Running: one cell (harness) and its options, the matrix, one scheduler interface (this process, worker processes,
runner environments' lanes), runner environments, interrupts."""
