"""What the commands print: rich tables for a terminal, and the JSON and markdown reports."""
