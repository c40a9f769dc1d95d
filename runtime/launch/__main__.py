"""`python -m runtime.launch ...` is `accel-launch ...`."""

from runtime.launch.cli import main

if __name__ == "__main__":
    main()
