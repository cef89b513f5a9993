"""The shared kit below every app: it imports no app.

JSON helpers (``core.json``), named domain errors (``core.errors``), contract
base types (``core.contracts``), the REST toolkit with its route + OpenAPI
registry and the REST error table (``core.api``), the human pages' Origin
check and error table (``core.pages``), long waits that hold no thread (``core.waits``), the clock
deadlines are decided on (``core.clock``), response headers (``core.middleware``), log redaction
(``core.logging``) and owner-only files (``core.files``).
"""
