"""Real clients against a live server: kubectl, the official Python client, the JavaScript
client, lightkube's server-side apply, the demo simulator."""
