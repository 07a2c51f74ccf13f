"""Internal: the HTTP routes, one module per resource.

Public names: none; the HTTP API is the interface (docs/server.md, "HTTP API").
"""
