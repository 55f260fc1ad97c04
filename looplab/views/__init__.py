"""Ways to look at results: the terminal, the HTML report, the scorecard, OpenTelemetry traces, and the kept
measurements' history and site pages."""
