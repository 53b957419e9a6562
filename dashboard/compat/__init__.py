"""What kubedash relies on inside its libraries, one module per library.

Every use of a private attribute, an undocumented hook or a module global of Twisted, Daphne
(with autobahn), Django, psycopg or asyncio sits behind a named function or class here, whose
docstring says what it relies on and the version it was checked with; tests/serving/test_compat.py
fails, naming the function, the library and its installed version, when a new version changes it.

This package imports nothing of the project: any part of it may use it.
"""
