"""Run the document face alone: ``python -m tuffdb.server.ekodb --port N --data-dir D``."""

from tuffdb.server.ekodb.server import main

if __name__ == "__main__":
    main()
