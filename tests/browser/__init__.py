"""The pages in Chromium (Playwright): live updates, reconnects, the editor, share links,
followed clusters, the habits users bring; axe-core on each state. Fixtures: tests/chromium.py."""
