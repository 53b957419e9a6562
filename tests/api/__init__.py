"""The REST API through the full Django stack and its machinery as plain functions: CRUD, lists,
discovery, schema and patches, selectors and Tables, validation and formats, direct dispatch, routes,
streamed lists, bad input (hypothesis)."""
