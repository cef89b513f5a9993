"""The shared kit below every app: it imports no app.

JSON helpers (``core.json``), named domain errors (``core.errors``), contract
base types (``core.contracts``), the REST toolkit with its route + OpenAPI
registry and the REST error table (``core.api``), the human pages' Origin
check (``core.origin``), long waits that hold no thread (``core.waits``), response headers, log
redaction and owner-only files.
"""
