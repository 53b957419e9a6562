"""The storage backends: SQLite's writer lock, PostgreSQL's update cache across processes,
column widths on both databases."""
