"""Run the gRPC face alone: ``python -m tuffdb.server.umadb --port N --data-dir D``."""

from tuffdb.server.umadb.server import main

if __name__ == "__main__":
    main()
