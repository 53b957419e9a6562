"""Watch streams against live servers: order, resume, bookmarks, fan-out to many watchers, the
hub at rest, and two processes on one database seeing every write."""
