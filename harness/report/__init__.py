"""Figures (matplotlib), the self-contained HTML / Markdown report over analysed run records, and the
commands that show the analysis (`analyze`, `report`, `compare`, `runs`)."""
