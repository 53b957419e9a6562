"""The server-rendered pages through the Django test client: lists, detail pages, forms and the
YAML editor, row and bulk actions, history, followed clusters' pages, the live pages' websocket,
static files."""
