"""Figures (matplotlib) and the self-contained HTML / Markdown report over analysed run records."""
