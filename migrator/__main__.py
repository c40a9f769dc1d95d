"""`python -m migrator` runs the accel-migrate command line."""

from migrator.cli import main

main()
