"""The server host (``tuffdb serve``: startup, config, admin endpoint, the face registry,
loop rounds) and one package per protocol face above the stores (docs/design/README.md)."""
