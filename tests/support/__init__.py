"""Helpers the tests share: real servers on loopback (uvicorn, OpenBao, a portal, an OAuth
server) and the executor's screen; fixtures that use them live in ``tests/conftest.py``."""
