"""`python -m migrator` runs the accel-migrate command line."""

from migrator.cli import main

if __name__ == "__main__":
    main()
